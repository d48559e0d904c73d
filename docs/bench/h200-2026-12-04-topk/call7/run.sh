#!/bin/bash
# call 7: main's head after the session (`f` = 6eb5542's build: the top-k from registers, down in
# one wave, the shared expert on a second stream, the small GEMMs on the gemv to 8 rows) against
# `h` (2af28d3): suites with fixture errors, sanitizers of the top-k and second-stream tests,
# demo, audit, the layer's table rows and small batches, the mixer's table rows.
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 200 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
W=f
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 300 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool racecheck --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'moe/moe_topk*' > $O/racecheck.txt 2>&1; echo "racecheck topk rc=$? $(tail -1 $O/racecheck.txt)" >> $O/log.txt
run $W timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/$W/metrale_layer_tests --jobs 1 --filter 'slots/second*' > $O/memcheck.txt 2>&1; echo "memcheck second stream rc=$? $(tail -1 $O/memcheck.txt)" >> $O/log.txt
run $W .carry/var/$W/metrale demo --backend cuda > $O/demo_$W.txt 2>&1; echo "demo rc=$?" >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
el suites
for r in 1 2; do for v in f h; do
B $v --part layer --decode 1,2,4,5,6,8,16,32,64,256 --prefill 4096,16384 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
done; done; el layer
B f --decode 1,8,64,256 --prefill 4096,16384 --json > $O/f_mixer.json 2>>$O/stderr.txt
B f --core --prefill 4096,16384 --json > $O/f_core.json 2>>$O/stderr.txt
el mixer
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), j.get('second_stream'), round(j.get('copy_gbps',0)), round(j.get('gemm_tflops',0)), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
