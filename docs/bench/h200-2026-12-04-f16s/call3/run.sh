#!/bin/bash
# call 3: the final tree (`f`: fp16 split forms as early-start rows, the prefill's one in_proj
# launch from 3 tokens, the new layer test) against `main` (c234d21's build): suites of f,
# the issue-6 table on f in three rounds with main beside it, small-batch and small-prefill
# rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=f
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 100 .carry/var/$W/metrale_layer_tests --jobs 1 --filter 'modes/small_decode*' > $O/layer_small_$W.txt 2>&1; echo "$W small-batch test rc=$? $(tail -1 $O/layer_small_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -30 >> $O/log.txt
el suites
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for r in 1 2 3; do
B $W --decode 1,8,64,256 --prefill 4096,16384 --json > $O/table_mixer_$r.json 2>>$O/stderr.txt
B main --decode 1,8,64,256 --prefill 4096,16384 --json > $O/main_mixer_$r.json 2>>$O/stderr.txt
B $W --core --prefill 4096,16384,65536 --json > $O/table_core_$r.json 2>>$O/stderr.txt
done; el table
for r in 1 2; do for v in $W main; do
B $v --part layer --decode 1,8,64,256 --prefill 64,4096,16384 --samples 11 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
done; done; el layer
for r in 1 2 3; do for v in main $W; do
  B $v --decode 2,3,4,5,8,16,32,64,96,128 --prefill 3,16,64,128,129 --samples 15 --json > $O/small_${v}_$r.json 2>>$O/stderr.txt
done; done; el small rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
