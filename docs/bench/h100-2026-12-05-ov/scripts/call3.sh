#!/bin/bash
# Timing build zs (zskip_timing.patch; since call 4 zside_timing.patch, whose mode 2 also projects z on the second stream beside the decode kernel): METRALE_TIMING_ZSKIP=1 makes the decode's in_proj gemv
# project P - nv*dv rows (q|k|v and 64 of z's rows) instead of P; z and b|a stay as earlier steps
# left them (wrong results, timing only).  The bound of taking z's 16.8 MB out of the projection
# in front of the decode kernel.  Mode 0 is main's code.
#   BUDGET=300 bash docs/bench/h100-2026-12-05-ov/scripts/call3.sh
cd "$(dirname "$0")/../../../.."
CALL=${CALL:-call3}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
for round in 1 2 3 4; do
  for m in 0 1 2; do
    run zs env METRALE_TIMING_ZSKIP=$m timeout $(tl 60) .carry/var/zs/metrale bench --backend cuda --decode 1 \
      --prefill 64 --samples 31 --json > $O/mixer_z${m}_r$round.json 2>>$O/stderr.txt
    el "mixer zskip $m round $round rc=$?"
  done
done
for round in 1 2; do
  for m in 0 1 2; do
    run zs env METRALE_TIMING_ZSKIP=$m timeout $(tl 60) .carry/var/zs/metrale bench --backend cuda --part layer \
      --decode 1 --prefill 64 --samples 31 --json > $O/layer_z${m}_r$round.json 2>>$O/stderr.txt
    el "layer zskip $m round $round rc=$?"
  done
done
finish
