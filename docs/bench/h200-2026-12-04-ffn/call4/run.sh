#!/bin/bash
# call 4: the committed decode rows (`f` = 28c5947's build; its kernels are call 3's `m4`)
# against `main` (d22bb05): suites of f (with the fixture errors), memcheck and racecheck of
# the new rows' tests, the audit, the whole layer's table rows (two rounds of 11 samples each),
# small decode batches, the mixer rows (which do not take the new kernels), ncu of the FFN at
# layer decode 1.
cd "$(dirname "$0")/../../../.."
O=$OUT/c4; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=f
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
for t in memcheck racecheck; do
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'moe/*_rows*' > $O/${t}.txt 2>&1; echo "$t rows rc=$? $(tail -1 $O/${t}.txt)" >> $O/log.txt
done
el suites
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
run $W timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'moe_|gemv|silu|add_rmsnorm|rmsnorm' --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size --csv \
  .carry/var/$W/metrale bench --backend cuda --part layer --decode 1 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_$W.csv 2>&1
el ncu
for r in 1 2; do for v in $W main; do
B $v --part layer --decode 1,8,64,256 --prefill 4096,16384 --samples 11 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
done; done; el layer table
for r in 1 2; do for v in main $W; do
B $v --part layer --decode 2,4,16,32,48 --prefill 64 --samples 15 --json > $O/${v}_small_$r.json 2>>$O/stderr.txt
done; done; el small
B $W --decode 1,8,64,256 --prefill 4096 --json > $O/${W}_mixer.json 2>>$O/stderr.txt; el mixer
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
