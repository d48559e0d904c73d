#!/bin/bash
# call 5: why gated_rmsnorm_rows_zh (z in half: a third fewer bytes) takes 42 us at 4096 tokens
# where base's gated_rmsnorm_rows takes 37.5 (calls 2-4, three forms of it): ncu --set full of
# each at 4096 tokens, the details page and the per-instruction SASS page.
cd "$(dirname "$0")/../../../.."
O=$OUT/c5; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
N=/usr/local/cuda/bin/ncu
date -u > $O/log.txt
for v in base zh; do
  run $v timeout 120 $N --set full --import-source no -k regex:'gated' --launch-count 1 -o $O/$v \
    .carry/var/$v/metrale bench --backend cuda --prefill 4096 --samples 1 --warmup 0 > $O/ncu_$v.txt 2>&1
  echo "$v rc=$?" >> $O/log.txt
  $N --import $O/$v.ncu-rep --page details --csv > $O/details_$v.csv 2>>$O/log.txt
  $N --import $O/$v.ncu-rep --page source --print-source sass --csv > $O/sass_$v.csv 2>>$O/log.txt
  rm -f $O/$v.ncu-rep
done
python3 - >> $O/log.txt <<'PY'
import csv,os
O=os.environ['OUT']+'/c5'
want=('Duration','Memory Throughput','DRAM Throughput','Executed Instructions','Achieved Occupancy','Theoretical Occupancy','Registers Per Thread','Issue Slots Busy','Eligible Warps Per Scheduler','No Eligible','L1/TEX Hit Rate','L2 Hit Rate','Block Limit Registers','Mem Busy','Max Bandwidth','Warp Cycles Per Issued Instruction','Achieved Active Warps Per SM','Waves Per SM','Grid Size','Block Size')
for v in ('base','zh'):
    try: rows=list(csv.DictReader(open(f'{O}/details_{v}.csv')))
    except Exception as e: print(v,e); continue
    for r in rows:
        if r.get('Metric Name','') in want: print(v, r['Section Name'][:22], r['Metric Name'], r['Metric Value'], r.get('Metric Unit',''))
PY
ls -la $O >> $O/log.txt
tar czf $OUT/c5.tgz -C $OUT c5 && cp $O/log.txt $OUT/log.txt && rm -rf $O
