#!/bin/bash
# Where the chunked core starts to beat the sequential one for short sequences: the core of S
# sequences of L tokens each, both paths forced by the timing build th (threshold_timing.patch:
# METRALE_TIMING_CHUNKED_MIN replaces CHUNKED_MIN_AVG_TOKENS, 1 = always chunked where the shapes
# fit, 1000000000 = always sequential), on cuda and on NVIDIA's Vulkan driver.
# Carry [".carry", ".gl"] with .carry/var/th (scripts/device-prepare.sh th
# docs/bench/h100-2026-12-05-short/threshold_timing.patch).
#   BUDGET=500 bash docs/bench/h100-2026-12-05-short/call1.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
lens() { local s=$1 out= L; for L in 4 8 16 24 32 48 64 96 128; do out=$out${out:+,}$((L * s)); done; echo $out; }
for S in 1 8 32 128; do
  for path in 1 1000000000; do
    run th env METRALE_TIMING_CHUNKED_MIN=$path timeout $(tl 90) .carry/var/th/metrale bench --backend cuda --core \
      --seqs $S --prefill $(lens $S) --samples 15 --json > $O/cuda_s${S}_min$path.json 2>>$O/stderr.txt
    el "cuda S=$S min=$path rc=$?"
  done
done
vulkan_env
for S in 1 16 128; do
  for path in 1 1000000000; do
    run th env METRALE_TIMING_CHUNKED_MIN=$path timeout $(tl 90) .carry/var/th/metrale bench --backend vulkan --core \
      --seqs $S --prefill $(lens $S) --samples 7 --warmup 2 --json > $O/vulkan_s${S}_min$path.json 2>>$O/stderr.txt
    el "vulkan S=$S min=$path rc=$?"
  done
done
finish
