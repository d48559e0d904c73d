#!/bin/bash
# call 1: where layer decode 1 and 8 spend their time at main's head (7a9679b, carried as `m`):
# ncu of every kernel of an eager layer decode step (clocks free), and the graph bench beside it.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 200 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv >> $O/log.txt
for n in 1 8; do
run m timeout 200 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread --csv \
  .carry/var/m/metrale bench --backend cuda --part layer --decode $n --prefill 1 --samples 1 --warmup 0 --no-graphs > $O/ncu_d$n.csv 2>&1
el ncu $n
done
for r in 1 2; do
B m --part layer --decode 1,2,4,8 --prefill 1 --samples 15 --json > $O/m_$r.json 2>>$O/stderr.txt
B m --part layer --decode 1,2,4,8 --prefill 1 --samples 15 --json --no-graphs > $O/m_eager_$r.json 2>>$O/stderr.txt
done; el rounds
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), round(j.get('copy_gbps',0)), round(j.get('gemm_tflops',0)), [(r.get('kind','core')[0]+str(r['n']), r['median_us']) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
