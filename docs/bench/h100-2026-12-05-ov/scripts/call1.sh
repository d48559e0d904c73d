#!/bin/bash
# Timing build (never landed): the prefill's gated norm (mode 1), or the gated norm and out_proj
# (mode 2), on the layer's second stream beside phase 1 of the fp16 core, without waiting for
# phase 1's o (the bench repeats one prefill, so the o they read is the last call's): the upper
# bound of overlapping them with the chain by segments.  Mode 0 is main's order.
# Carry [".carry"] with .carry/var/ov (scripts/device-prepare.sh ov
# docs/bench/h100-2026-12-05-ov/overlap_timing.patch).
#   BUDGET=420 bash docs/bench/h100-2026-12-05-ov/scripts/call1.sh
cd "$(dirname "$0")/../../../.."
CALL=call1
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
for round in 1 2 3; do
  for m in 0 1 2; do
    run ov env METRALE_TIMING_OVERLAP=$m timeout $(tl 60) .carry/var/ov/metrale bench --backend cuda --decode 1 \
      --prefill 4096,16384 --samples 15 --json > $O/mixer_m${m}_r$round.json 2>>$O/stderr.txt
    el "mixer mode $m round $round rc=$?"
  done
done
for m in 0 1 2; do
  run ov env METRALE_TIMING_OVERLAP=$m timeout $(tl 90) .carry/var/ov/metrale bench --backend cuda --part layer \
    --decode 1 --prefill 4096,16384 --samples 11 --json > $O/layer_m$m.json 2>>$O/stderr.txt
  el "layer mode $m rc=$?"
done
# power and clocks through a 16384-token mixer prefill, modes 0 and 2
for m in 0 2; do
  nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks_event_reasons.active --format=csv -lms 20 > $O/smi_m$m.csv 2>&1 &
  sp=$!
  run ov env METRALE_TIMING_OVERLAP=$m timeout $(tl 60) .carry/var/ov/metrale bench --backend cuda --decode 1 \
    --prefill 16384 --samples 40 --json > $O/power_m$m.json 2>>$O/stderr.txt
  kill $sp
  el "power mode $m"
done
finish
