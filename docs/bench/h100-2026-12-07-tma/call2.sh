#!/bin/bash
# Prepared 2026-12-07 (fifty-fifth session): branch vtma (v by two TMA copies a chunk, read by
# ldmatrix) as build vt and branch vq (vt + Q on a barrier of its own, copied last) against main's
# p6, in the order of what matters most should the device time run out: vq's cuda conformance and
# layer suites, a round of the core's rows (bench's, slow and FlashQLA's gates) and the mixer's
# prefill rows for the three, ncu's source view of vq's phase 3 at 16384 tokens (as call.sh's for
# p6), vt's gdn conformance tests and layer modes, a second round.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-vt}
BUDGET=${BUDGET:-330}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
suites vq
round() {
  for v in vq vt p6; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$1.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 16384 --samples 15 --json > $O/${v}_slow_$1.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384 --samples 15 --json > $O/${v}_peer_$1.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$1.json 2>>$O/stderr.txt
    el "$v round $1 rc=$?"
  done
}
round 1
run vq timeout $(tl 120) /usr/local/cuda/bin/ncu --clock-control none -k regex:wh_seg --launch-skip 2 --launch-count 1 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --import-source no -f -o /tmp/phase3 \
  .carry/var/vq/metrale bench --backend cuda --core --prefill 16384 --samples 1 --warmup 0 > $O/ncu_phase3.txt 2>&1
el "ncu phase 3 rc=$?"
run vq timeout $(tl 60) /usr/local/cuda/bin/ncu -i /tmp/phase3.ncu-rep --page source --csv --print-source sass \
  > $O/phase3_source.csv 2>>$O/ncu_phase3.txt
run vq timeout $(tl 30) /usr/local/cuda/bin/ncu -i /tmp/phase3.ncu-rep --page details --csv > $O/phase3_details.csv 2>>$O/ncu_phase3.txt
el "ncu phase 3 pages rc=$?"
suites vt 'gdn/*' 'modes/*'
round 2
finish
