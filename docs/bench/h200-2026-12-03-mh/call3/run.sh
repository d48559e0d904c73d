#!/bin/bash
# call 3: the issue-6 table on the build of 1ef7d0c (`fin`; its CUDA module byte-identical to
# call 2's mh), with its suites (conformance_cuda incl. the cols3q refusal test new since call 2,
# layer_cuda), compute-sanitizer memcheck and racecheck of the two new rows' tests, the audit, and
# main's (`head`, f4b07f0) mixer rows in the same call.
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=fin
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -30 >> $O/log.txt
el suites
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
run $W timeout 150 $CS --tool $tool --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gemm/gemm_f16_ws_cols3q' > $O/${tool}_cols3q.txt 2>&1; echo "$tool cols3q rc=$? $(grep -c 'ERROR SUMMARY: 0' $O/${tool}_cols3q.txt) clean summaries, $(tail -1 $O/${tool}_cols3q.txt)" >> $O/log.txt
run $W timeout 150 $CS --tool $tool --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'conv/conv1d_prefill_l2norm_xh' > $O/${tool}_convxh.txt 2>&1; echo "$tool conv xh rc=$? $(tail -1 $O/${tool}_convxh.txt)" >> $O/log.txt
done; el sanitizers
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2; do
B $W --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B $W --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
B head --decode 1 --prefill 4096,16384 --json > $O/head_mixer_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do
B $W --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/table_layer_$r.json 2>>$O/stderr.txt
done; el layer
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), {k:j[k] for k in j if k != 'results' and not isinstance(j[k],(list,dict))}, [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us'), r.get('max_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
