#!/bin/bash
# call 1: HEAD (86ac7be: the review commits 7d7eee3, 3646031 never run on the GPU) suites;
# f16d (decode batches that fill gemm_f16_ws's tiles project on fp16 x) suites, A/B against
# head at mixer decode 64..256 and layer decode 256; ncu of a decode 256 step for both
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c1; mkdir -p $O; date -u > $O/checks.txt; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv >> $O/checks.txt
for v in head f16d; do
run $v env METRALE_TEST_BACKEND=cuda timeout 240 .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_$v.txt 2>&1; echo "$v conformance rc=$?" >> $O/checks.txt; tail -1 $O/conf_$v.txt >> $O/checks.txt
run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_PRINT_ERRORS=1 timeout 240 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$?" >> $O/checks.txt; tail -1 $O/layer_$v.txt >> $O/checks.txt
el suites $v
done
cat $O/checks.txt
run f16d .carry/var/f16d/metrale audit --backend cuda > $O/audit_f16d.txt 2>&1
for r in 1 2; do for v in head f16d; do
  B $v --decode 64,128,129,192,256 --prefill 4096 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
  B $v --part layer --decode 256 --prefill 4096 --samples 11 --json > $O/lay_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for v in head f16d; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 256 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_dec256_$v.csv 2>&1
done
el ncu
python3 - <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r['kind'][0]+str(r['n']), r['median_us']) for r in j['results']])
PY
tar czf $OUT/c1.tgz -C $OUT c1 && rm -rf $O
