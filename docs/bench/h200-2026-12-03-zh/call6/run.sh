#!/bin/bash
# call 6: the gated norm was issue-bound (call 5: 79 % of issue slots, 57 instructions a value,
# most of them f32_to_bf16's integer rounding), so z in half only added instructions.  Now both
# norm kernels round by cvt.rn.bf16x2.f32 (common.cuh bf16x2_rn).  Builds: base (main), rnd (the
# cheap rounding, z in f32: zh's kernels with the layer's z-half switch off), zh (the cheap
# rounding and z in half, four rows a warp).  ncu first, then the mixer rounds, then zh's suites.
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for v in base rnd zh; do for n in 4096 16384; do
run $v timeout 90 /usr/local/cuda/bin/ncu --clock-control none -k regex:'cols3|gated' --metrics gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2 3; do for v in base rnd zh; do
  B $v --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
export METRALE_TEST_BACKEND=cuda
ok=1
run zh env METRALE_CF_LOG_NMSE=1 timeout 60 .carry/var/zh/metrale_conformance --filter 'norm/*' --verbose > $O/new_norm.txt 2>&1 || ok=0
echo "norm tests ok=$ok $(tail -1 $O/new_norm.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/new_norm.txt | head -20 >> $O/log.txt
run zh timeout 200 .carry/var/zh/metrale_conformance --jobs 8 > $O/conf_zh.txt 2>&1 || ok=0; echo "zh conformance ok=$ok $(tail -1 $O/conf_zh.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/conf_zh.txt | head -20 >> $O/log.txt
run zh env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/zh/metrale_layer_tests --jobs 4 > $O/layer_zh.txt 2>&1 || ok=0; echo "zh layer ok=$ok $(tail -1 $O/layer_zh.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert" $O/layer_zh.txt | head -20 >> $O/log.txt
el suites
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c6'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:28]]).append(d['Metric Name'][:18]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c6.tgz -C $OUT c6 && cp $O/log.txt $OUT/log.txt && rm -rf $O
