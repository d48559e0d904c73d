#!/bin/bash
# 2026-12-06 (forty-eighth session): the decode kernels' state asked of L2 before they wait.
# Builds, made by scripts/device-prepare.sh:
#   m  main at 127c601
#   a  m + pf.patch (a timing build): gdn_decode_cluster35 (batches 1-4) asks L2 for its block's
#      state slice before griddepcontrol.wait; gdn_decode_pair35 (from batch 5) becomes an
#      early-start row, and its first 396 blocks ask L2 for their head (one bulk prefetch) first
# Mixer decode rows of both, alternating, three rounds; layer decode 1 and 256; the cuda
# conformance and layer suites of a.  Carry [".carry"].
#   BUDGET=540 bash docs/bench/h200-2026-12-06-pf/call1.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run a timeout $(tl 150) .carry/var/a/metrale_conformance --jobs 8 > $O/conf_cuda_a.txt 2>&1
el "a cuda conformance rc=$? $(tail -1 $O/conf_cuda_a.txt)"
run a timeout $(tl 200) .carry/var/a/metrale_layer_tests --jobs 8 > $O/layer_cuda_a.txt 2>&1
el "a cuda layer rc=$? $(tail -1 $O/layer_cuda_a.txt)"
unset METRALE_TEST_BACKEND
for round in 1 2 3; do
  for v in m a; do
    B $v --part mixer --decode 1,2,4,5,8,16,64,128,256 --prefill 64 --samples 15 --json \
      > $O/${v}_mixer_r$round.json 2>>$O/stderr.txt
    el "$v mixer round $round rc=$?"
  done
done
for round in 1 2; do
  for v in m a; do
    B $v --part layer --decode 1,8,64,256 --prefill 64 --samples 15 --json \
      > $O/${v}_layer_r$round.json 2>>$O/stderr.txt
    el "$v layer round $round rc=$?"
  done
done
finish
