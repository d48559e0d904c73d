#!/bin/bash
# call 7: the code to land (fin): main + gated_rmsnorm_rows rounding by bf16x2_rn (common.cuh), the
# fp16 core's power-of-two helpers shared by both phases, bf16x2_rn's duplicates in gdn_chunked.cu
# and moe_ws.cuh removed; z in half not kept.  Its suites, then ncu of the norm and mixer rounds
# against main's build (base).
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
ok=1
run fin timeout 120 .carry/var/fin/metrale_conformance --jobs 8 > $O/conf_fin.txt 2>&1 || ok=0; echo "fin conformance ok=$ok $(tail -1 $O/conf_fin.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_fin.txt | head -20 >> $O/log.txt
run fin env METRALE_TEST_PRINT_ERRORS=1 timeout 120 .carry/var/fin/metrale_layer_tests --jobs 4 > $O/layer_fin.txt 2>&1 || ok=0; echo "fin layer ok=$ok $(tail -1 $O/layer_fin.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/layer_fin.txt | head -20 >> $O/log.txt
el suites
run fin timeout 60 /usr/local/cuda/bin/ncu --clock-control none -k regex:'gated' --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv \
  .carry/var/fin/metrale bench --backend cuda --prefill 4096,16384 --samples 1 --warmup 0 > $O/ncu_fin.csv 2>&1
grep gated $O/ncu_fin.csv | cut -c1-40,200- >> $O/log.txt
for r in 1 2; do for v in base fin; do
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], [(r['n'], r['median_us']) for r in j['results'] if r.get('kind')!='decode'])" $O/mix_${v}_$r.json $v >> $O/log.txt 2>&1
done; done; el mixer
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
