#!/bin/bash
# call 2: the routed experts' down weights read ahead by gate and up at decode 1 (`p`), the
# post-attention norm inside the router's launch at 1-16 tokens (`n`), both (`pn`), against main
# (`m`, 7a9679b): suites of pn, sanitizers of the new tests, ncu of decode 1 and 8 on pn, layer
# decode rounds as graphs.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 200 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
W=pn
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 300 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
for t in memcheck racecheck synccheck; do
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'moe/moe_norm_router*' > $O/${t}.txt 2>&1; echo "$t norm_router rc=$? $(tail -1 $O/${t}.txt)" >> $O/log.txt
done
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'moe/moe_gate_up_silu_rows*' > $O/memcheck_gu.txt 2>&1; echo "memcheck gate_up rc=$? $(tail -1 $O/memcheck_gu.txt)" >> $O/log.txt
run $W .carry/var/$W/metrale demo --backend cuda > $O/demo_$W.txt 2>&1; echo "demo rc=$?" >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
el suites
for n in 1 8; do
run $W timeout 200 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread --csv \
  .carry/var/$W/metrale bench --backend cuda --part layer --decode $n --prefill 1 --samples 1 --warmup 0 --no-graphs > $O/ncu_d$n.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in m p n pn; do
B $v --part layer --decode 1,2,4,8,16 --prefill 1 --samples 15 --json > $O/${v}_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c2'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), round(j.get('copy_gbps',0)), round(j.get('gemm_tflops',0)), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
