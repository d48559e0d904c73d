#!/bin/bash
# call 2: in_proj at decode 3-128 on fp16 x by the split forms and the prefill's one in_proj
# launch from 3 tokens, as early-start rows (`d`) and as plain launches (`e`), against `main`
# (c234d21's build): suites of d, mixer and layer A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c2; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
for v in d e; do
run $v timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$? $(tail -1 $O/conf_$v.txt)" >> $O/log.txt
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$v.txt $O/layer_$v.txt | head -30 >> $O/log.txt
done
el suites
run d .carry/var/d/metrale audit --backend cuda > $O/audit_d.txt 2>&1
for r in 1 2 3; do for v in main d e; do
  B $v --decode 3,5,8,16,32,64,96,128 --prefill 16,64,128 --samples 15 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for r in 1 2; do for v in main d e; do
  B $v --part layer --decode 3,8,64,128 --prefill 64,128 --samples 11 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; el layer round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c2'
for f in sorted(glob.glob(O+'/mix_*.json')+glob.glob(O+'/layer_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','?')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c2.tgz -C $OUT c2 && cp $O/log.txt $OUT/log.txt && rm -rf $O
