#!/bin/bash
# call 3: the decode rows' loads in flight.  `n` (call 2's build): ptxas interleaves the weight
# loads with the products (about two of a lane's loads in flight); `m`: a block fence after the
# loads keeps them all issued first (gate and up: 16 a lane, 102 registers; down: 8, 64
# registers); `m4`: the same with gate and up in two steps of 8 loads (64 registers).  ncu of
# the FFN kernels at layer decode 1 and 8, layer decode rounds against `main` (d22bb05).
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
for v in n m m4; do
run $v timeout 120 /usr/local/cuda/bin/ncu --clock-control none -k regex:'moe_|gemv_bf16|silu' --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread --csv \
  .carry/var/$v/metrale bench --backend cuda --part layer --decode 1,8 --prefill 64 --samples 1 --warmup 0 --no-graphs > $O/ncu_${v}.csv 2>&1
done; el ncu
for r in 1 2 3; do for v in main n m m4; do
B $v --part layer --decode 1,2,4,8,16,32 --prefill 64 --samples 15 --json > $O/layer_${v}_$r.json 2>>$O/stderr.txt
done; done; el layer rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os,csv,collections
O=os.environ['OUT']+'/c3'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
for v in ('n','m','m4'):
    try:
        rows=list(csv.reader(open(f'{O}/ncu_{v}.csv')))
        hi=[i for i,r in enumerate(rows) if r and r[0]=='ID'][0]
        h=rows[hi]; ki=h.index('Kernel Name'); mi=h.index('Metric Name'); vi=h.index('Metric Value'); ii=h.index('ID')
        per=collections.OrderedDict()
        for r in rows[hi+1:]:
            if len(r)<len(h): continue
            per.setdefault(r[ii],{'k':r[ki]})[r[mi]]=r[vi]
        print(v, [(k['k'][:22], k.get('gpu__time_duration.sum'), k.get('launch__grid_size'), k.get('launch__registers_per_thread')) for k in list(per.values())[:14]])
    except Exception as e: print(v, e)
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
