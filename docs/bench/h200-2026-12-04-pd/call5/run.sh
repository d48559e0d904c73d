#!/bin/bash
# call 5: the gemv threshold (ops.c GEMV_MAX_M) at 3 (`gm3`) and 2 (`gm2`) rows, the working tree
# on d530920, against `c35` (13b697a's build, threshold 4): layer tests of gm2, then mixer decode
# 1..5 and layer decode 2 / 4 A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run gm2 env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/gm2/metrale_layer_tests --jobs 4 > $O/layer_gm2.txt 2>&1; echo "gm2 layer rc=$? $(tail -1 $O/layer_gm2.txt)" >> $O/log.txt
el suites
for r in 1 2 3; do for v in c35 gm3 gm2; do
  B $v --decode 1,2,3,4,5,8 --prefill 256 --samples 21 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for r in 1 2; do for v in c35 gm2; do
  B $v --part layer --decode 2,3,4 --prefill 256 --samples 11 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; el layer round $r; done
run gm2 .carry/var/gm2/metrale audit --backend cuda > $O/audit_gm2.txt 2>&1
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c5'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
