#!/bin/bash
# 2026-12-06: the whole-head core as the ops take it (branch wh, 7th commit: from a third of the
# SMs in blocks).  The cuda conformance and layer suites; the mixer at 4096 and 16384 tokens as
# one sequence (the fp16 kernel: as main) and as 8 (the whole-head one), with it and without
# (METRALE_NO_WHOLE_HEAD=1), alternating, two rounds.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call6}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run wh timeout $(tl 150) .carry/var/wh/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run wh timeout $(tl 220) .carry/var/wh/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "cuda layer rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
for round in 1 2; do
  for off in 0 1; do
    METRALE_NO_WHOLE_HEAD=$off B wh --part mixer --decode 1 --prefill 4096,16384 --seqs 8 --samples 15 --json > $O/mixer8_off${off}_r$round.json 2>>$O/stderr.txt
    el "mixer 8 seqs off=$off round $round rc=$?"
  done
  B wh --part mixer --decode 1 --prefill 4096,16384 --samples 15 --json > $O/mixer1_r$round.json 2>>$O/stderr.txt
  el "mixer 1 seq round $round rc=$?"
done
finish
