#!/bin/bash
# call 1: in_proj at decode 3-128 on fp16 x (gemm_f16_ws64_splitk2 / gemm_f16_ws_splitk2) and
# out_proj at 129-256 on 64-row tiles in 4 slices (`b`), the same with the 64-row 4-slice out_proj
# from 65 (`c`), against `main` (c234d21's build): suites of b, sanitizers of the new rows, ncu
# of the projections, mixer and layer decode A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=b
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
for v in main $W; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
el suites
for t in memcheck racecheck synccheck; do
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gemm/gemm_f16_ws*split*' > $O/${t}_f16.txt 2>&1; echo "$t f16 split rc=$? $(tail -1 $O/${t}_f16.txt)" >> $O/log.txt
done
run $W timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 9 .carry/var/$W/metrale_conformance --jobs 1 --filter 'gemm/gemm_bf16_ws64_splitk4' > $O/memcheck_bf16.txt 2>&1; echo "memcheck bf16 ws64 split4 rc=$? $(tail -1 $O/memcheck_bf16.txt)" >> $O/log.txt
el sanitizers
run $W .carry/var/$W/metrale audit --backend cuda > $O/audit_$W.txt 2>&1
for v in main $W; do
run $v timeout 150 /usr/local/cuda/bin/ncu --clock-control none -k regex:'gemm|gemv|f32_to_f16' --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 8,64,128,192,256 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in main b c; do
  B $v --decode 3,4,5,8,16,32,64,96,128,129,192,256 --prefill 64 --samples 15 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
for r in 1 2; do for v in main $W; do
  B $v --part layer --decode 8,64,256 --prefill 64 --samples 11 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; el layer round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/mix_*.json')+glob.glob(O+'/layer_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','?')[0]+str(r['n']), r['median_us']) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:26]]).append(d['Metric Name'].split('__')[1][:12]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
