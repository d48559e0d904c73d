#!/bin/bash
# 2026-12-06: where the whole-head scan's time goes.  Build wh (branch wh, 5th commit: loads at S out, O by stores).  ncu on
# the core at 4096 tokens (one sequence): both kernels' durations, warp states and the stall
# samples of every SASS instruction (sass.csv).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call4}
. scripts/device-call.sh
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run wh timeout $(tl 120) .carry/var/wh/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh.txt 2>&1
el "wh conformance rc=$? $(tail -1 $O/conf_wh.txt)"
unset METRALE_TEST_BACKEND
for off in 0 1; do
  METRALE_NO_WHOLE_HEAD=$off B wh --core --prefill 4096,16384 --samples 15 --json > $O/core_off${off}.json 2>>$O/stderr.txt
  el "core off=$off rc=$?"
  METRALE_NO_WHOLE_HEAD=$off B wh --core --prefill 16384 --seqs 8 --samples 15 --json > $O/core8_off${off}.json 2>>$O/stderr.txt
  el "core 8 seqs off=$off rc=$?"
done
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
