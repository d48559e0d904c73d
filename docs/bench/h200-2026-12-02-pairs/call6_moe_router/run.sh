#!/bin/bash
# call 6: moe_sort in rounds of 4096 rows, the router on the paired ws tile (mr) against c3e4ce1 (final)
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/m; date -u > $OUT/m/checks.txt
run mr env METRALE_TEST_BACKEND=cuda timeout 200 .carry/var/mr/metrale_conformance --jobs 8 > $OUT/m/conf_mr.txt 2>&1; echo "conformance rc=$?" >> $OUT/m/checks.txt; tail -1 $OUT/m/conf_mr.txt >> $OUT/m/checks.txt
for v in mr final; do
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $OUT/m/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $OUT/m/checks.txt; tail -1 $OUT/m/layer_$v.txt >> $OUT/m/checks.txt
grep -o "error [0-9.e+-]* (tolerance [0-9.e+-]*): .*" $OUT/m/layer_$v.txt | sort > $OUT/m/fix_$v.txt
done
echo "fixture lines $(wc -l < $OUT/m/fix_mr.txt), differing from final: $(diff $OUT/m/fix_mr.txt $OUT/m/fix_final.txt | grep -c '^<')" >> $OUT/m/checks.txt
for tool in memcheck racecheck; do
  run mr env METRALE_TEST_BACKEND=cuda timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .carry/var/mr/metrale_conformance --jobs 1 --filter 'moe/moe_sort' > $OUT/m/san_sort_$tool.txt 2>&1; echo "sort $tool rc=$?" >> $OUT/m/checks.txt
done
run mr env METRALE_TEST_BACKEND=cuda timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/mr/metrale_conformance --jobs 1 --filter 'gemm/gemm_bf16_f32_ws' > $OUT/m/san_router.txt 2>&1; echo "router memcheck rc=$?" >> $OUT/m/checks.txt
cat $OUT/m/checks.txt; el checks
for r in 1 2 3; do for v in mr final; do
  B $v --part layer --decode 1,256 --prefill 4096,16384 --samples 21 --json > $OUT/m/lay_${v}_$r.json 2>>$OUT/m/stderr.txt
done; el round $r; done
for v in mr final; do
  run $v timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum -k regex:'moe_sort|gemm_bf16_f32' --csv \
    .carry/var/$v/metrale bench --backend cuda --part layer --decode 1 --prefill 4096 --samples 1 --warmup 0 > $OUT/m/ncu_$v.csv 2>&1
done
el ncu
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/m'
for f in sorted(glob.glob(O+'/lay_*.json')):
    j=json.load(open(f)); print(os.path.basename(f), [(r['kind'][0]+str(r['n']), r['median_us'], r['min_us']) for r in j['results']])
PY
tar czf $OUT/m.tgz -C $OUT m && rm -rf $OUT/m
