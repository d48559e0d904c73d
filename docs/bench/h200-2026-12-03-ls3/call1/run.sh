#!/bin/bash
# call 1: phase 1 of the fp16 core with S's plane put under the last plane's exponent (ls3:
# ls2.patch with its __syncthreads_count test replaced by the block maximum read after the
# barrier, and a second set of warp maxima for the re-put), against u1 (main's kernels).
# Benches first under short timeouts; then the fp16 test (with its new ramp cases) on u1,
# ls3 and ls3bad (ls3 without the re-put: must fail); the whole suites of ls3 last.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/ls3 "$@"; }
B() { run $1 timeout 30 .carry/var/ls3/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for r in 1 2 3; do for v in u1 ls3; do
  B $v --core --prefill 4096,16384,65536 --json > $O/core_${v}_$r.json 2>>$O/stderr.txt
done; el core round $r; done
for r in 1 2; do for v in u1 ls3; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
export METRALE_TEST_BACKEND=cuda
for v in u1 ls3 ls3bad; do
  run $v env METRALE_CF_LOG_NMSE=1 timeout 60 .carry/var/ls3/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_f16' --verbose > $O/f16_$v.txt 2>&1
  echo "$v f16 test rc=$? $(tail -1 $O/f16_$v.txt) worst: $(grep 'nmse chunked/32' $O/f16_$v.txt | sed 's/.*: //' | sort -g | tail -1)" >> $O/log.txt
done
el f16 tests
run ls3 timeout 150 .carry/var/ls3/metrale_conformance --jobs 8 > $O/conf_ls3.txt 2>&1; echo "ls3 conformance rc=$? $(tail -1 $O/conf_ls3.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_ls3.txt | head -20 >> $O/log.txt
run ls3 env METRALE_TEST_PRINT_ERRORS=1 timeout 150 .carry/var/ls3/metrale_layer_tests --jobs 4 > $O/layer_ls3.txt 2>&1; echo "ls3 layer rc=$? $(tail -1 $O/layer_ls3.txt)" >> $O/log.txt
el suites
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
