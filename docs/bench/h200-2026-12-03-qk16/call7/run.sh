#!/bin/bash
# call 7: the conv + l2norm's blocks along the tokens (ops.c conv_l2norm_rows) as whole waves of
# the waves 64-token blocks would need (head: 2 waves of 99 x 8 blocks at 4096 tokens, 6 at
# 16384) against the waves of 128-token (w2: 1 wave of 49 x 8 at 4096, 3 of 148 x 8 at 16384)
# and 256-token blocks (w4: 1 wave at 4096, 2 waves of 99 x 8 at 16384): fewer block starts and
# ends, the same work.  Only libmetrale differs (the kernel is main's).
cd "$(dirname "$0")/../../../.."
O=$OUT/c7; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 60 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt
V="head w2 w4"
for v in $V; do for n in 4096 16384; do
run $v timeout 90 /usr/local/cuda/bin/ncu --clock-control none -k regex:'conv1d' --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size --csv \
  .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill $n --samples 1 --warmup 0 > $O/ncu_${v}_$n.csv 2>&1
done; done; el ncu
for r in 1 2 3; do for v in $V; do
  B $v --decode 1 --prefill 4096,16384 --json > $O/mix_${v}_$r.json 2>>$O/stderr.txt
done; el mixer round $r; done
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv
O=os.environ['OUT']+'/c7'
for f in sorted(glob.glob(O+'/mix_*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r['n'], r['median_us'], r.get('min_us')) for r in j['results'] if r.get('kind','')!='decode'])
for f in sorted(glob.glob(O+'/ncu_*.csv')):
    rows=list(csv.reader(open(f))); hdr=None; out={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r)); out.setdefault(d['ID'],[d['Kernel Name'][:22]]).append(d['Metric Name'].split('__')[1][:12]+'='+d['Metric Value'])
    for k in sorted(out,key=int): print(os.path.basename(f), out[k])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c7.tgz -C $OUT c7 && cp $O/log.txt $OUT/log.txt && rm -rf $O
