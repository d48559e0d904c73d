#!/bin/bash
# call 8: moe_gate_up_silu_rows at two loads a row a step (`u2`: 48 registers, five blocks an
# SM, decode 1's 640 blocks in one wave, as moe_down_rows since bd492f9) against `f` (6eb5542,
# four: 64 registers): moe conformance of u2, ncu of the rows kernels, layer rounds.
cd "$(dirname "$0")/../../../.."
O=$OUT/c8; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 200 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
export METRALE_TEST_BACKEND=cuda
run u2 timeout 100 .carry/var/u2/metrale_conformance --jobs 4 --filter 'moe/*' > $O/conf_u2.txt 2>&1; echo "u2 moe rc=$? $(tail -1 $O/conf_u2.txt)" >> $O/log.txt
for v in f u2; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'moe_gate_up_silu_rows|moe_down_rows' --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --part layer --decode 1,4 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_$v.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in f u2; do
B $v --part layer --decode 1,2,3,4,8,12,16,32,40 --prefill 64 --samples 15 --json > $O/${v}_$r.json 2>>$O/stderr.txt
done; done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c8'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out=[]
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r))
            if d['Metric Name']=='gpu__time_duration.sum': out.append((d['Kernel Name'][:14], d['Metric Value']))
    print(os.path.basename(f), out)
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c8.tgz -C $OUT c8 && cp $O/log.txt $OUT/log.txt && rm -rf $O
