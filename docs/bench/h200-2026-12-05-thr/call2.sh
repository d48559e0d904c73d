#!/bin/bash
# Batched prefills (metrale bench --seqs) on main's head, build t2 = HEAD +
# threshold_timing2.patch: METRALE_TIMING_CHUNKED_MIN=64 restores the old rule (the sequential
# delta rule below 64 tokens a sequence on average), unset is main's (the fp16 core from 32).
#   BUDGET=300 bash docs/bench/h200-2026-12-05-thr/call2.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
for round in 1 2; do
  for S in 32 64 128; do
    for rule in new old; do
      e=; [ $rule = old ] && e=METRALE_TIMING_CHUNKED_MIN=64
      run t2 env $e timeout $(tl 60) .carry/var/t2/metrale bench --backend cuda --decode 1 --prefill 2048,4096 \
        --seqs $S --samples 15 --json > $O/mixer_s${S}_${rule}_r$round.json 2>>$O/stderr.txt
      el "mixer S=$S $rule round $round rc=$?"
    done
  done
done
for S in 1 8 32 128; do
  run t2 timeout $(tl 90) .carry/var/t2/metrale bench --backend cuda --part layer --decode 1 --prefill 4096 \
    --seqs $S --samples 11 --json > $O/layer_s$S.json 2>>$O/stderr.txt
  el "layer S=$S rc=$?"
done
run t2 env METRALE_TIMING_CHUNKED_MIN=64 timeout $(tl 90) .carry/var/t2/metrale bench --backend cuda --part layer \
  --decode 1 --prefill 4096 --seqs 128 --samples 11 --json > $O/layer_s128_old.json 2>>$O/stderr.txt
el "layer S=128 old rc=$?"
finish
