#!/bin/bash
# call 7: which decode kernel from batch 5 (`dv`: 1f6ef47's tree with cluster35 up to batch 8, pair35
# from 9 and never fused35), against `c35` (13b697a's build: cluster35 to 4, pair35 from 5, fused35
# at 13-16): layer tests of dv, mixer decode A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run dv env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/dv/metrale_layer_tests --jobs 4 > $O/layer_dv.txt 2>&1; echo "dv layer rc=$? $(tail -1 $O/layer_dv.txt)" >> $O/log.txt
el suites
for r in 1 2 3; do for v in c35 dv; do
  B $v --decode 5,6,8,12,13,16 --prefill 256 --samples 21 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
