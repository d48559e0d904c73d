#!/bin/bash
# call 8: HEAD with the producers' walk in one function (head) against e4fb05c (me): suites,
# mixer decode/prefill rounds; every kernel of a layer prefill at 4096 tokens (ncu)
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/h; date -u > $OUT/h/checks.txt
run head env METRALE_TEST_BACKEND=cuda timeout 200 .carry/var/head/metrale_conformance --jobs 8 > $OUT/h/conf_head.txt 2>&1; echo "conformance rc=$?" >> $OUT/h/checks.txt; tail -1 $OUT/h/conf_head.txt >> $OUT/h/checks.txt
run head env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/head/metrale_layer_tests --jobs 4 > $OUT/h/layer_head.txt 2>&1; echo "layer rc=$?" >> $OUT/h/checks.txt; tail -1 $OUT/h/layer_head.txt >> $OUT/h/checks.txt
cat $OUT/h/checks.txt; el checks
for r in 1 2; do for v in head me; do
  B $v --decode 1,8,64,256 --prefill 4096,16384 --json > $OUT/h/mix_${v}_$r.json 2>>$OUT/h/stderr.txt
done; el round $r; done
run head timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  .carry/var/head/metrale bench --backend cuda --part layer --decode 1 --prefill 4096 --samples 1 --warmup 0 > $OUT/h/ncu_layer_all.csv 2>&1
el ncu
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/h'
for f in sorted(glob.glob(O+'/mix_*.json')):
    j=json.load(open(f)); print(os.path.basename(f), j['gemm_tflops'], [(r['kind'][0]+str(r['n']), r['median_us']) for r in j['results']])
PY
tar czf $OUT/h.tgz -C $OUT h && rm -rf $OUT/h
