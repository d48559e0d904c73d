#!/bin/bash
# 2026-12-06: main after the merge (build mm = b434b3c) against the build of 127c601 (m, the
# kernels main had at the session's start): the cuda conformance and layer suites of mm; the
# mixer's default rows (decode 1-256, prefill 4096 and 16384 as one sequence: the fp16 core in
# both) of both in turn, two rounds; the mixer as 8 sequences of mm.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call8}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run mm timeout $(tl 150) .carry/var/mm/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "mm cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run mm timeout $(tl 220) .carry/var/mm/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "mm cuda layer rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
for round in 1 2; do
  for v in m mm; do
    B $v --part mixer --decode 1,8,64,256 --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_r$round.json 2>>$O/stderr.txt
    el "$v mixer round $round rc=$?"
  done
done
B mm --part mixer --decode 1 --prefill 16384 --seqs 8 --samples 15 --json > $O/mm_mixer8.json 2>>$O/stderr.txt
el "mm mixer 8 seqs rc=$?"
finish
