#!/bin/bash
# call 1: where the whole layer's decode step at small batches spends its time (`main` =
# d22bb05's build): every kernel of a layer decode step at batch 1 and 8 under ncu (eager
# launches, clocks free), and the step replayed as a graph and launched eagerly.
cd "$(dirname "$0")/../../../.."
O=$OUT/c1; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*" >> $O/log.txt; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 150 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
date -u > $O/log.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv >> $O/log.txt
ls /usr/local/cuda/bin | grep -i nsys >> $O/log.txt; which nsys >> $O/log.txt 2>&1
run main .carry/var/main/metrale audit --backend cuda > $O/audit.txt 2>&1
for b in 1 8; do
run main timeout 200 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__block_size --csv \
  .carry/var/main/metrale bench --backend cuda --part layer --decode $b --samples 1 --warmup 1 --no-graphs > $O/ncu_layer_d$b.csv 2>&1
el ncu $b
done
for r in 1 2; do
B main --part layer --decode 1,2,4,8 --samples 11 --json > $O/layer_graph_$r.json 2>>$O/stderr.txt
B main --part layer --decode 1,2,4,8 --samples 11 --no-graphs --json > $O/layer_eager_$r.json 2>>$O/stderr.txt
B main --decode 1,8 --samples 11 --json > $O/mixer_graph_$r.json 2>>$O/stderr.txt
done; el bench
python3 - > $O/summary.txt <<'PY'
import json,glob,os
O=os.environ['OUT']+'/c1'
for f in sorted(glob.glob(O+'/*.json')):
    try: j=json.load(open(f))
    except Exception as e: print(f, e); continue
    print(os.path.basename(f), [(r.get('kind','core')[0]+str(r['n']), r['median_us'], r.get('min_us')) for r in j['results']])
PY
cat $O/summary.txt >> $O/log.txt
tar czf $OUT/c1.tgz -C $OUT c1 && cp $O/log.txt $OUT/log.txt && rm -rf $O
