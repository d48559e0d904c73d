#!/bin/bash
# call 8: the f16 core's phase 0 in an entry of its own, as a row (`f16p`, the working tree on
# 7a0eefa: delta_rule_prefill_chunked_f16_prep, 159 registers; phase 1 from
# delta_rule_prefill_chunked_f16).  Its suites (conformance_cuda, layer_cuda), memcheck of its
# test, the audit, then the issue-6 table on it (two rounds; layer rows 11 samples) with `fin`
# (1ef7d0c)'s mixer and core rows in the same call.
cd "$(dirname "$0")/../../../.."
O=$OUT/c8; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=f16p
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
for v in fin $W; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -30 >> $O/log.txt
diff <(grep -i "err\|nmse" $O/layer_fin.txt | sed 's/([0-9.]*s)//' | sort) <(grep -i "err\|nmse" $O/layer_$W.txt | sed 's/([0-9.]*s)//' | sort) > $O/layer_diff.txt; echo "layer error lines differing from fin: $(grep -c '^[<>]' $O/layer_diff.txt) of $(grep -ci 'err\|nmse' $O/layer_fin.txt)" >> $O/log.txt
el suites
run $W timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gdn/delta_rule_prefill_chunked_f16_prep' > $O/memcheck_f16prep.txt 2>&1; echo "memcheck f16_prep rc=$? $(tail -1 $O/memcheck_f16prep.txt)" >> $O/log.txt
el memcheck
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2; do
B $W --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $W --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
B fin --decode 1 --prefill 4096,16384 --json > $O/fin_mixer_$r.json 2>>$O/stderr.txt
B fin --core --prefill 4096,16384,65536 --json > $O/fin_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $W --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c8'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c8.tgz -C $OUT c8 && cp $O/log.txt $OUT/log.txt && rm -rf $O
