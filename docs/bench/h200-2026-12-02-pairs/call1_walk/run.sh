#!/bin/bash
# call 1: conformance + layer on the walk build; A/B base vs pers; ncu of the ws GEMMs
cd "$(dirname "$0")/../.."
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
git log -1 --format='%H %cd' >> $OUT/gpu.txt; date -u >> $OUT/gpu.txt
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/r
el conformance
run pers env METRALE_TEST_BACKEND=cuda timeout 300 .carry/var/pers/metrale_conformance --jobs 8 --short-filename > $OUT/r/conf_pers.txt 2>&1; tail -2 $OUT/r/conf_pers.txt
el layer
run pers env METRALE_TEST_BACKEND=cuda timeout 300 .carry/var/pers/metrale_layer_tests --jobs 8 --short-filename > $OUT/r/layer_pers.txt 2>&1; tail -2 $OUT/r/layer_pers.txt
el sanitizers
CS=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  run pers env METRALE_TEST_BACKEND=cuda timeout 200 $CS --tool $tool --error-exitcode 9 .carry/var/pers/metrale_conformance --jobs 1 --filter 'gemm/*_walk' > $OUT/r/san_$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $OUT/r/san_$tool.txt
done
el ab
for r in 1 2 3; do for v in base pers; do
  B $v --decode 1 --prefill 4096,16384 --json > $OUT/r/mix_${v}_$r.json 2>>$OUT/r/stderr.txt
  B $v --part layer --decode 1 --prefill 4096 --samples 9 --json > $OUT/r/lay_${v}_$r.json 2>>$OUT/r/stderr.txt
done; el round $r; done
el ncu
for v in base pers; do
  run $v timeout 200 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum -k regex:'gemm_(f16|bf16)_ws' --csv \
    .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 16384,4096 --samples 1 --warmup 0 > $OUT/r/ncu_$v.csv 2>&1
  grep -c gpu__time $OUT/r/ncu_$v.csv
done
el done
python3 - <<'PY'
import json,glob,os,statistics as st
O=os.environ['OUT']+'/r'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(os.path.basename(f),'bad',e); continue
    print(os.path.basename(f), json.dumps(j)[:600])
PY
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
