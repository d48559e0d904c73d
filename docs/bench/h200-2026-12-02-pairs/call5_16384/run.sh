#!/bin/bash
# call 5: layer and mixer prefill 16384, more rounds and samples; ncu of the layer's ws GEMMs at 4096
cd "$(dirname "$0")/../.."
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
B() { run $1 timeout 120 .carry/var/$1/metrale bench --backend cuda "${@:2}"; }
mkdir -p $OUT/u
date -u > $OUT/u/date.txt
for r in 1 2 3 4; do for v in final base; do
  B $v --part layer --decode 1 --prefill 16384 --samples 31 --json > $OUT/u/lay_${v}_$r.json 2>>$OUT/u/stderr.txt
  B $v --decode 1 --prefill 16384 --samples 31 --json > $OUT/u/mix_${v}_$r.json 2>>$OUT/u/stderr.txt
done; el round $r; done
for v in final base; do
  run $v timeout 150 /usr/local/cuda/bin/ncu --clock-control none --metrics gpu__time_duration.sum -k regex:'gemm_' --csv \
    .carry/var/$v/metrale bench --backend cuda --part layer --decode 1 --prefill 4096 --samples 1 --warmup 0 > $OUT/u/ncu_layer_$v.csv 2>&1
  el ncu $v
done
python3 - <<'PY'
import json,glob,os,statistics as st
O=os.environ['OUT']+'/u'
for k in ['lay','mix']:
  for v in ['final','base']:
    m=[];n=[]
    for f in sorted(glob.glob(f'{O}/{k}_{v}_*.json')):
        j=json.load(open(f)); r=[x for x in j['results'] if x['kind']=='prefill'][0]; m.append(r['median_us']); n.append(r['min_us'])
    print(k,v,'medians',m,'mins',n)
PY
tar czf $OUT/u.tgz -C $OUT u && rm -rf $OUT/u
