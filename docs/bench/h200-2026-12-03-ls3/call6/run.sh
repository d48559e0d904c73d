#!/bin/bash
# call 6: where the fp16 core's phases wait at f46c819 (main, carried as f16s): ncu --set full
# of phase 0 and phase 1 at 16384 tokens, the details page and the per-instruction SASS page
# (stall samples, executed instructions), for the next session's plan.
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
v=f16s
run() { METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
N=/usr/local/cuda/bin/ncu
date -u > $O/log.txt
for ph in 0 1; do
  run timeout 200 $N --set full --import-source no -k regex:'chunked' --launch-skip $ph --launch-count 1 -o $O/ph$ph \
    .carry/var/$v/metrale bench --backend cuda --core --prefill 16384 --samples 1 --warmup 0 > $O/ncu_ph$ph.txt 2>&1
  echo "phase $ph rc=$?" >> $O/log.txt
  $N --import $O/ph$ph.ncu-rep --page details --csv > $O/details_ph$ph.csv 2>>$O/log.txt
  $N --import $O/ph$ph.ncu-rep --page source --print-source sass --csv > $O/sass_ph$ph.csv 2>>$O/log.txt
  rm -f $O/ph$ph.ncu-rep
done
ls -la $O >> $O/log.txt
tar czf $OUT/c6.tgz -C $OUT c6 && cp $O/log.txt $OUT/log.txt && rm -rf $O
