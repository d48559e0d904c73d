#!/bin/bash
# call 4: out_proj at decode 1-2 on gemv_bf16_staged (`g`: a block's 8 weight rows copied into
# shared memory while the decode kernel runs) against `f` (511c1c2's code) and `main`: suites
# of g, sanitizers of the staged gemv's test, five rounds of mixer decode 1-4 and layer decode
# 1, 2, 8.
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=g
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
for v in f $W; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -30 >> $O/log.txt
el suites
for t in memcheck racecheck synccheck; do
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gemm/gemv_bf16_staged' > $O/${t}_staged.txt 2>&1; echo "$t staged rc=$? $(tail -1 $O/${t}_staged.txt)" >> $O/log.txt
done
el sanitizers
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2 3 4 5; do for v in main f $W; do
  B $v --decode 1,2,3,4 --prefill 64 --samples 21 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; done; el mixer rounds
for r in 1 2 3; do for v in f $W; do
  B $v --part layer --decode 1,2,8 --prefill 64 --samples 15 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; done; el layer rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c4'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c4.tgz -C $OUT c4 && cp $O/log.txt $OUT/log.txt && rm -rf $O
