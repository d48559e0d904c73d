#!/bin/bash
# call 10: main's head after the session (`h` = 7da9e14's build: the decode rows, the 4/5
# crossover, dot8_add, the shared expert on the rows up to 12) against `main` (d22bb05): suites
# of h with fixture errors, demo, audit, layer decode rounds at the batches whose paths changed.
cd "$(dirname "$0")/../../../.."
O=$OUT/c10; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=h
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
run $W env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$W/metrale_layer_tests --jobs 4 > $O/layer_$W.txt 2>&1; echo "$W layer rc=$? $(tail -1 $O/layer_$W.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
run $W .carry/var/$W/metrale demo --backend cuda > $O/demo_$W.txt 2>&1; echo "demo rc=$?" >> $O/log.txt
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
el suites
for r in 1 2; do for v in main $W; do
B $v --part layer --decode 1,2,4,8,16,32,40 --prefill 64 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c10'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
grep -A9 "MoE: 512" $O/audit_$W.txt >> $O/log.txt
tar czf $OUT/c10.tgz -C $OUT c10 && cp $O/log.txt $OUT/log.txt && rm -rf $O
