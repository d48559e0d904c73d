#!/bin/bash
# call 9: moe_combine_wide four features a thread (cb) against e0d6614 (head)
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/c; date -u > $OUT/c/checks.txt
run cb env METRALE_TEST_BACKEND=cuda timeout 90 .carry/var/cb/metrale_conformance --jobs 8 > $OUT/c/conf_cb.txt 2>&1; echo "conformance rc=$?" >> $OUT/c/checks.txt; tail -1 $OUT/c/conf_cb.txt >> $OUT/c/checks.txt
for v in cb head; do
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 60 .carry/var/$v/metrale_layer_tests --jobs 8 > $OUT/c/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $OUT/c/checks.txt; tail -1 $OUT/c/layer_$v.txt >> $OUT/c/checks.txt
grep -o "error [0-9.e+-]* (tolerance [0-9.e+-]*): .*" $OUT/c/layer_$v.txt | sort > $OUT/c/fix_$v.txt
done
echo "fixture lines $(wc -l < $OUT/c/fix_cb.txt), differing from head: $(diff $OUT/c/fix_cb.txt $OUT/c/fix_head.txt | grep -c '^<')" >> $OUT/c/checks.txt
run cb env METRALE_TEST_BACKEND=cuda timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/cb/metrale_conformance --jobs 1 --filter 'moe/moe_combine*' > $OUT/c/san_combine.txt 2>&1; echo "combine memcheck rc=$?" >> $OUT/c/checks.txt
cat $OUT/c/checks.txt; el checks
for r in 1 2; do for v in cb head; do
  B $v --part layer --decode 1,256 --prefill 4096 --samples 15 --json > $OUT/c/lay_${v}_$r.json 2>>$OUT/c/stderr.txt
done; el round $r; done
for v in cb head; do
  run $v timeout 60 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum -k regex:'moe_combine' --csv \
    .carry/var/$v/metrale bench --backend cuda --part layer --decode 1 --prefill 4096 --samples 1 --warmup 0 > $OUT/c/ncu_$v.csv 2>&1
  grep moe_combine $OUT/c/ncu_$v.csv | awk -F'","' '{print "'$v'", $5, $NF}'
done
el ncu
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c'
for f in sorted(glob.glob(O+'/lay_*.json')):
    j=json.load(open(f)); print(os.path.basename(f), [(r['kind'][0]+str(r['n']), r['median_us'], r['min_us']) for r in j['results']])
PY
tar czf $OUT/c.tgz -C $OUT c && rm -rf $OUT/c
