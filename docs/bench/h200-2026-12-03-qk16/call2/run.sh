#!/bin/bash
# call 2 (the qk16 core fixed: W's K slabs from qk too; the layer test with NaN in qkv): q and k handed from the conv to the fp16 core in IEEE half (conv1d_prefill_l2norm_qk16,
# delta_rule_prefill_chunked_f16_qk16).  Builds:
#   head  b0cf9b6 (main; cubins as 2b5ffe8's)
#   qk16  the working tree: the two new rows, the ops/mixer handover, the bench's core on qk16;
#         phase 0 loads q and k into registers and widens them into shared memory
#   qk16a the same but phase 0 copies q and k's halves by cp.async and widens them in shared memory
# Suites of qk16 (conformance, layer) and head's layer suite for the fixture-line diff, then
# mixer prefill A/B rounds and the core at three lengths.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run qk16a timeout 100 .carry/var/qk16a/metrale_conformance --jobs 8 --filter '*/*qk16*' > $O/conf_qk16a_new.txt 2>&1; echo "qk16a new tests rc=$? $(tail -1 $O/conf_qk16a_new.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_qk16a_new.txt | head -30 >> $O/log.txt
run qk16 timeout 100 .carry/var/qk16/metrale_conformance --jobs 8 --filter '*/*qk16*' > $O/conf_qk16_new.txt 2>&1; echo "qk16 new tests rc=$? $(tail -1 $O/conf_qk16_new.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_qk16_new.txt | head -30 >> $O/log.txt
el new tests
run qk16a timeout 240 .carry/var/qk16a/metrale_conformance --jobs 8 > $O/conf_qk16a.txt 2>&1; echo "qk16a conformance rc=$? $(tail -1 $O/conf_qk16a.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_qk16a.txt | head -30 >> $O/log.txt
el conformance
for v in head qk16 qk16a; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/layer_qk16.txt $O/layer_qk16a.txt | head -30 >> $O/log.txt
for v in qk16 qk16a; do
diff <(grep -i "err\|nmse" $O/layer_head.txt | sed 's/([0-9.]*s)//' | sort) <(grep -i "err\|nmse" $O/layer_$v.txt | sed 's/([0-9.]*s)//' | sort) > $O/layer_diff_$v.txt; echo "$v: layer error lines differing: $(grep -c '^[<>]' $O/layer_diff_$v.txt) of $(grep -ci 'err\|nmse' $O/layer_head.txt)" >> $O/log.txt
done
el layer suites
run qk16a .carry/var/qk16a/metrale audit --backend cuda > $O/audit_qk16a.txt 2>&1
for v in head qk16 qk16a; do
run $v timeout 90 /usr/local/cuda/bin/ncu --clock-control none -k regex:'conv1d|delta_rule' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 4096 --samples 1 --warmup 0 > $O/ncu_${v}_4096.csv 2>&1
done; el ncu
for r in 1 2; do for v in head qk16 qk16a; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
for v in head qk16 qk16a; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}.json 2>>$O/stderr.txt
done; el core
for v in head qk16 qk16a; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_3.json 2>>$O/stderr.txt
done; el mixer round 3
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c2'
for f in sorted(glob.glob(O+'/mix_*.json'))+sorted(glob.glob(O+'/core_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
import csv
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:26]]).append(d['Metric Name'].split('__')[1][:16]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
