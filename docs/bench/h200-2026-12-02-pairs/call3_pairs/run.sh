#!/bin/bash
# call 3: pair (multicast clusters of two) + walk: correctness, A/B against base and the walk alone
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/r
run pair env METRALE_TEST_BACKEND=cuda timeout 120 .carry/var/pair/metrale_conformance --jobs 8 --filter 'gemm/*' > $OUT/r/conf_gemm_pair.txt 2>&1; echo "gemm rc=$?"; tail -2 $OUT/r/conf_gemm_pair.txt
grep -i "fail\|error" $OUT/r/conf_gemm_pair.txt | head -5
run pair env METRALE_TEST_BACKEND=cuda timeout 200 .carry/var/pair/metrale_conformance --jobs 8 > $OUT/r/conf_pair.txt 2>&1; tail -1 $OUT/r/conf_pair.txt
run pair env METRALE_TEST_BACKEND=cuda timeout 200 .carry/var/pair/metrale_layer_tests --jobs 8 > $OUT/r/layer_pair.txt 2>&1; tail -1 $OUT/r/layer_pair.txt
el tests
for tool in memcheck synccheck; do
  run pair env METRALE_TEST_BACKEND=cuda timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool --error-exitcode 9 .carry/var/pair/metrale_conformance --jobs 1 --filter 'gemm/gemm_*16_ws*' > $OUT/r/san_$tool.txt 2>&1; echo "$tool rc=$?"; tail -2 $OUT/r/san_$tool.txt
done
el san
for r in 1 2; do
  for cfg in base exp:0 pair:0 pair:1 pair:2; do
    v=${cfg%%:*}; k=${cfg#*:}; [ "$v" = base ] && k=x
    METRALE_WS_PER_BLOCK=$k B $v --decode 1,256 --prefill 4096,16384 --json > $OUT/r/mix_${v}_${k}_$r.json 2>>$OUT/r/stderr.txt
  done; el round $r
done
METRALE_WS_PER_BLOCK=0 B pair --part layer --decode 1 --prefill 4096 --samples 9 --json > $OUT/r/lay_pair.json 2>>$OUT/r/stderr.txt
B base --part layer --decode 1 --prefill 4096 --samples 9 --json > $OUT/r/lay_base.json 2>>$OUT/r/stderr.txt
for cfg in pair:0 pair:1; do v=${cfg%%:*}; k=${cfg#*:}
  METRALE_WS_PER_BLOCK=$k run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum -k regex:'gemm_(f16|bf16)_ws' --csv \
    .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 16384,4096 --samples 1 --warmup 0 > $OUT/r/ncu_${v}_$k.csv 2>&1
done
el ncu
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/r'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(os.path.basename(f),'bad',e); continue
    print(os.path.basename(f), j['gemm_tflops'], [(r['kind'][0]+str(r['n']), r['median_us'], r['min_us']) for r in j['results']])
PY
tar czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
