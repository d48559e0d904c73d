#!/bin/bash
# call 6: where phase 0 of the fp16 core (`_prep`, `ef` = e3856c9's build) spends its issue slots:
# ncu --set full with the per-instruction source page at 4096 tokens (one launch).
cd "$(dirname "$0")/../../../.."
O=$OUT/c6; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt
NCU=/usr/local/cuda/bin/ncu
run ef timeout 200 $NCU --set full --import-source no -k regex:'chunked_f16_prep' -c 1 -o $O/rep .carry/var/ef/metrale bench --backend cuda --core --prefill 4096 --samples 1 --warmup 0 > $O/ncu_run.txt 2>&1; echo "ncu rc=$?" >> $O/log.txt
$NCU -i $O/rep.ncu-rep --page details --csv > $O/details.csv 2>&1
$NCU -i $O/rep.ncu-rep --page source --csv --print-source sass > $O/source_sass.csv 2>&1
/usr/local/cuda/bin/cuobjdump -sass -fun delta_rule_prefill_chunked_f16_prep .carry/var/ef/libmetrale-backend-cuda.so > $O/prep.sass 2>&1; echo "sass lines $(wc -l < $O/prep.sass)" >> $O/log.txt
rm -f $O/rep.ncu-rep
grep -i "Duration\|Issue Slots\|Warp Cycles Per Issued\|Executed Ipc" $O/details.csv | cut -c1-220 >> $O/log.txt
tar czf $OUT/c6.tgz -C $OUT c6 && cp $O/log.txt $OUT/log.txt && rm -rf $O
