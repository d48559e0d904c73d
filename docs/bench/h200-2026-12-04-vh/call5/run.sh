#!/bin/bash
# call 5: bf16 roundings by cvt where they were integer steps (`cv`, the working tree on 56edb65:
# add_rmsnorm's three, rmsnorm's store, the pair stores of the MoE and mma GEMM epilogues) against
# `nf` (4f7ca6b).  Suites (the layer's error lines must be identical), ncu of add_rmsnorm and the
# MoE kernels in layer prefills of 4096 / 16384 tokens, layer A/B rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
W=cv
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
export METRALE_TEST_BACKEND=cuda
run $W timeout 240 .carry/var/$W/metrale_conformance --jobs 8 > $O/conf_$W.txt 2>&1; echo "$W conformance rc=$? $(tail -1 $O/conf_$W.txt)" >> $O/log.txt
for v in nf $W; do
run $v env METRALE_TEST_PRINT_ERRORS=1 timeout 200 .carry/var/$v/metrale_layer_tests --jobs 4 > $O/layer_$v.txt 2>&1; echo "$v layer rc=$? $(tail -1 $O/layer_$v.txt)" >> $O/log.txt
done
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_$W.txt $O/layer_$W.txt | head -40 >> $O/log.txt
diff <(grep -i "err\|nmse" $O/layer_nf.txt | sed 's/([0-9.]*s)//' | sort) <(grep -i "err\|nmse" $O/layer_$W.txt | sed 's/([0-9.]*s)//' | sort) > $O/layer_diff.txt; echo "layer error lines differing from nf: $(grep -c '^[<>]' $O/layer_diff.txt) of $(grep -ci 'err\|nmse' $O/layer_nf.txt)" >> $O/log.txt
el suites
for v in nf $W; do
run $v timeout 150 /usr/local/cuda/bin/ncu --clock-control none -k regex:'add_rmsnorm|moe_|rmsnorm$' --metrics gpu__time_duration.sum,smsp__inst_executed.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part layer --prefill 4096,16384 --samples 1 --warmup 0 > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in nf $W; do
  B $v --part layer --decode 1,64,256 --prefill 4096,16384 --samples 11 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; el layer round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c5'
for f in sorted(glob.glob(O+'/layer_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:26]]).append(d['Metric Name'].split('__')[1][:12]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
