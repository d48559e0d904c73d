#!/bin/bash
# 2026-12-06 (forty-eighth session), call 2: call 1 (an H100) put decode 1 0.4-0.6 us faster with
# the cluster kernel's state slice asked of L2 before its wait, and decode 4 1.2-1.6 us slower; the
# pair kernel's early start moved its rows by -1.0 to +0.3 us.  So only batch 1 now:
#   m  main at 127c601
#   b  m + pf_b.patch: at batch 1, gdn_decode_cluster35 asks L2 for its state slice and its channels'
#      conv state and weights before griddepcontrol.wait
#   c  m + pf_c.patch: the state slice only
# Mixer decode 1, 2, 4 and layer decode 1, 2 of all three in turn, five rounds; the cuda
# conformance and layer suites of b.  Carry [".carry"].
#   BUDGET=540 bash docs/bench/h200-2026-12-06-pf/call2.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run b timeout $(tl 150) .carry/var/b/metrale_conformance --jobs 8 > $O/conf_cuda_b.txt 2>&1
el "b cuda conformance rc=$? $(tail -1 $O/conf_cuda_b.txt)"
run b timeout $(tl 200) .carry/var/b/metrale_layer_tests --jobs 8 > $O/layer_cuda_b.txt 2>&1
el "b cuda layer rc=$? $(tail -1 $O/layer_cuda_b.txt)"
unset METRALE_TEST_BACKEND
for round in 1 2 3 4 5; do
  for v in m b c; do
    B $v --part mixer --decode 1,2,4 --prefill 64 --samples 15 --json > $O/${v}_mixer_r$round.json 2>>$O/stderr.txt
    el "$v mixer round $round rc=$?"
    B $v --part layer --decode 1,2 --prefill 64 --samples 15 --json > $O/${v}_layer_r$round.json 2>>$O/stderr.txt
    el "$v layer round $round rc=$?"
  done
done
finish
