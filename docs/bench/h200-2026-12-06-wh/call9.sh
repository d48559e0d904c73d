#!/bin/bash
# 2026-12-06: where delta_rule_prefill_chunked_wh_prep's time goes.  Build mm (main b434b3c).  ncu on
# the core at 16384 tokens as 8 sequences: phase 0's duration, warp states, memory and every SASS
# instruction's stall samples (sass.csv).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call9}
. scripts/device-call.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
run mm timeout $(tl 200) $NCU --kernel-name delta_rule_prefill_chunked_wh_prep --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy \
  --section MemoryWorkloadAnalysis -o $O/rep .carry/var/mm/metrale bench --backend cuda --core --prefill 16384 \
  --seqs 8 --samples 1 --warmup 0 > $O/ncu_run.txt 2>&1
el "ncu rc=$?"
$NCU -i $O/rep.ncu-rep --print-summary none > $O/ncu_details.txt 2>&1
$NCU -i $O/rep.ncu-rep --page source --print-source sass --csv > $O/sass.csv 2>&1
el "sass rc=$? $(wc -l < $O/sass.csv) lines"
grep -iE "duration|Registers|Warp Cycles|Occupancy|Block Limit|Memory Throughput|DRAM Throughput|L2 Hit|stall" $O/ncu_details.txt | head -40 >> $O/log.txt
rm -f $O/rep.ncu-rep
finish
