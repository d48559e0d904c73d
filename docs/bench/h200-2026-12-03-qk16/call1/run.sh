#!/bin/bash
# call 1: q and k handed from the conv to the fp16 core in IEEE half (conv1d_prefill_l2norm_qk16,
# delta_rule_prefill_chunked_f16_qk16).  Builds:
#   head  b0cf9b6 (main; cubins as 2b5ffe8's)
#   qk16  the working tree: the two new rows, the ops/mixer handover, the bench's core on qk16
# Suites of qk16 (conformance, layer) and head's layer suite for the fixture-line diff, then
# mixer prefill A/B rounds and the core at three lengths.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run qk16 timeout 100 .carry/var/qk16/metrale_conformance --jobs 8 --filter '*/*qk16*' > $O/conf_qk16_new.txt 2>&1; echo "qk16 new tests rc=$? $(tail -1 $O/conf_qk16_new.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_qk16_new.txt | head -30 >> $O/log.txt
el new tests
run qk16 timeout 240 .carry/var/qk16/metrale_conformance --jobs 8 > $O/conf_qk16.txt 2>&1; echo "qk16 conformance rc=$? $(tail -1 $O/conf_qk16.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_qk16.txt | head -30 >> $O/log.txt
el conformance
for v in head qk16; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/layer_qk16.txt | head -30 >> $O/log.txt
diff <(grep -i "err\|nmse" $O/layer_head.txt | sed 's/([0-9.]*s)//' | sort) <(grep -i "err\|nmse" $O/layer_qk16.txt | sed 's/([0-9.]*s)//' | sort) > $O/layer_diff.txt; echo "layer error lines differing: $(grep -c '^[<>]' $O/layer_diff.txt) of $(grep -ci 'err\|nmse' $O/layer_head.txt)" >> $O/log.txt
el layer suites
run qk16 .carry/var/qk16/metrale audit --backend cuda > $O/audit_qk16.txt 2>&1
for r in 1 2; do for v in head qk16; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
for v in head qk16; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}.json 2>>$O/stderr.txt
done; el core
for v in head qk16; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_3.json 2>>$O/stderr.txt
done; el mixer round 3
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/mix_*.json'))+sorted(glob.glob(O+'/core_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
