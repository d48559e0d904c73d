#!/bin/bash
# call 5: why W's K slabs in half cost phase 0 ~17 us at 4096 tokens (call 4): ncu --set full of
# phase 0 (the first launch of the fp16 core) in the 4096-token core bench, for head, qk16a (K
# slabs from qk's halves) and qk16t (the timing build: K slabs from qkv's f32); qk16a's SASS.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O; N=/usr/local/cuda/bin/ncu
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt
for v in head qk16a qk16t; do
  run $v timeout 150 $N --set full --import-source no -k regex:'delta_rule_prefill_chunked_f16' --launch-count 1 -o $O/p0_$v \
    .carry/var/$v/metrale bench --backend cuda --core --prefill 4096 --samples 1 --warmup 0 > $O/ncu_$v.txt 2>&1
  echo "$v ncu rc=$?" >> $O/log.txt
  $N --import $O/p0_$v.ncu-rep --page details --csv > $O/details_$v.csv 2>>$O/log.txt
  [ $v = qk16a ] && $N --import $O/p0_$v.ncu-rep --page source --print-source sass --csv > $O/sass_$v.csv 2>>$O/log.txt
  rm -f $O/p0_$v.ncu-rep
  date -u >> $O/log.txt
done
python3 - >> $O/log.txt <<'PY'
import csv,os
O=os.environ['OUT']+'/c5'
keys=['Duration','Executed Instructions','Issue Slots Busy','DRAM Throughput','L1/TEX Hit Rate','L2 Hit Rate','Achieved Occupancy','Registers Per Thread','Warp Cycles Per Issued Instruction','Stall Long Scoreboard','Memory Throughput','L2 Cache Throughput','L1/TEX Cache Throughput','Eligible Warps Per Scheduler','No Eligible','Block Limit Registers','Mem Busy','Max Bandwidth']
for v in ['head','qk16a','qk16t']:
    try: rows=list(csv.DictReader(open(f'{O}/details_{v}.csv')))
    except Exception as e: print(v,e); continue
    for r in rows:
        if r.get('Metric Name') in keys: print(v, r['Section Name'][:20], r['Metric Name'], r['Metric Value'], r.get('Metric Unit',''))
PY
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
