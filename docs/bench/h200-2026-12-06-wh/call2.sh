#!/bin/bash
# 2026-12-06: where the whole-head scan's time goes.  Build wh (branch wh, 3rd commit).  ncu on
# the core at 4096 tokens (one sequence): both kernels' durations, warp states and the stall
# samples of every SASS instruction (sass.csv).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
. scripts/device-call.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
el "ncu: $NCU"
run wh timeout $(tl 240) $NCU --kernel-name regex:delta_rule_prefill_chunked_wh --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
  --section MemoryWorkloadAnalysis -o $O/rep .carry/var/wh/metrale bench --backend cuda --core --prefill 4096 \
  --samples 1 --warmup 0 > $O/ncu_run.txt 2>&1
el "ncu rc=$?"
$NCU -i $O/rep.ncu-rep --print-summary none > $O/ncu_details.txt 2>&1
$NCU -i $O/rep.ncu-rep --page source --print-source sass --csv > $O/sass.csv 2>&1
el "sass rc=$? $(wc -l < $O/sass.csv) lines"
grep -i "duration\|Registers\|Warp Cycles\|Issued\|Stall\|No Eligible" $O/ncu_details.txt | head -40 >> $O/log.txt
rm -f $O/rep.ncu-rep
finish
