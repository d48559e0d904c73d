#!/bin/bash
# call 1: consumer warpgroup 1 of the ws GEMM tiles started SKEW k steps behind warpgroup 0
# (gemm_ws.cuh, METRALE_WS_SKEW; 16-bit x whole-K forms), so that one warpgroup's stores overlap
# the other's MMAs.  sk0 = 304ec17's kernels; sk3, sk5, sk7.  gemm conformance, ncu of the
# prefill GEMMs, mixer A/B.
cd "$(dirname "$0")/../../../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
O=$OUT/c1; mkdir -p $O; date -u > $O/log.txt; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv >> $O/log.txt
V="sk0 sk3 sk5 sk7"
for v in $V; do
  run $v env METRALE_TEST_BACKEND=cuda timeout 120 .carry/var/sk0/metrale_conformance --filter 'gemm/*' > $O/conf_$v.txt 2>&1; echo "$v rc=$?" >> $O/log.txt
  tail -3 $O/conf_$v.txt >> $O/log.txt
done
el conformance
for v in $V; do for n in 4096 16384; do
run $v timeout 100 /usr/local/cuda/bin/ncu --clock-control none -k regex:'cols3|gemm_bf16_ws' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done
el ncu
for r in 1 2; do for v in $V; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:22]]).append(d['Metric Name'][:14]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
