#!/bin/bash
# call 2: the shared expert on a second stream (`s`: the working tree after bd492f9, the vtable's
# stream_wait, the layer's fork and join; `metrale bench --one-stream` runs the same build on one
# stream) against `c` (call 1's build: bd492f9's kernels) and `h` (2af28d3): suites of s (the new
# top-k shapes, memory::stream_wait, slots::second_stream_equals_one_stream), the audit, layer rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 200 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
W=s
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 300 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
run $W timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/$W/metrale_layer_tests --jobs 1 --filter 'slots/second*' > $O/memcheck.txt 2>&1; echo "memcheck second stream rc=$? $(tail -1 $O/memcheck.txt)" >> $O/log.txt
run $W .carry/var/$W/metrale demo --backend cuda > $O/demo_$W.txt 2>&1; echo "demo rc=$?" >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
el suites
for r in 1 2; do
B s --part layer --decode 1,2,4,8,16,32,64,256 --prefill 512,4096,16384 --samples 15 --json > $O/s_layer_$r.json 2>>$O/stderr.txt
B s --part layer --decode 1,2,4,8,16,32,64,256 --prefill 512,4096,16384 --samples 15 --json --one-stream > $O/s1_layer_$r.json 2>>$O/stderr.txt
B h --part layer --decode 1,2,4,8,16,32,64,256 --prefill 512,4096,16384 --samples 15 --json > $O/h_layer_$r.json 2>>$O/stderr.txt
done; el rounds
B s --part layer --decode 1,8 --samples 15 --json --no-graphs > $O/s_eager.json 2>>$O/stderr.txt
B s --part layer --decode 1,8 --samples 15 --json --no-graphs --one-stream > $O/s1_eager.json 2>>$O/stderr.txt
el eager
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c2'
rows={}
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), j.get('second_stream'), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
