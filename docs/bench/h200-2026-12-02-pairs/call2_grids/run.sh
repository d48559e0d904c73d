#!/bin/bash
# call 2: why the probe is slower with the persistent walk: grid sizes (exp build), boost-clock ncu, power/clock
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/r
for r in 1 2; do
  for cfg in base exp:0 exp:1 exp:2 exp:4; do
    v=${cfg%%:*}; k=${cfg#*:}; [ "$v" = base ] && k=x
    METRALE_WS_PER_BLOCK=$k B $v --decode 1 --prefill 4096,16384 --json > $OUT/r/mix_${v}_${k}_$r.json 2>>$OUT/r/stderr.txt
  done; el round $r
done
for cfg in base exp:0; do
  v=${cfg%%:*}; k=${cfg#*:}; [ "$v" = base ] && k=x
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 20 > $OUT/r/smi_${v}_$k.csv &
  P=$!
  METRALE_WS_PER_BLOCK=$k B $v --decode 1 --prefill 16384 --samples 150 --json > $OUT/r/long_${v}_$k.json 2>>$OUT/r/stderr.txt
  kill $P; el smi $cfg
  METRALE_WS_PER_BLOCK=$k run $v timeout 200 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second -k regex:'gemm_(f16|bf16)_ws' --csv \
    .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 16384,4096 --samples 1 --warmup 0 > $OUT/r/ncu_${v}_$k.csv 2>&1
  el ncu $cfg
done
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/r'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(os.path.basename(f),'bad',e); continue
    print(os.path.basename(f), j['gemm_tflops'], [(r['kind'][0]+str(r['n']), r['median_us'], r['min_us']) for r in j['results']])
PY
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
