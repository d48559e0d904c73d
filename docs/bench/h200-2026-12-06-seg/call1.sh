#!/bin/bash
# 2026-12-06: the whole-head scan in segments (build sg = branch seg at 2708bfb).  The whole-head
# conformance tests (wh and wh_seg) first, the whole-head layer test, then the core of one sequence
# at 4096 / 16384 / 65536 tokens for METRALE_WH_SEGMENTS = 0 (the fp16 kernel, as main), 5, 3, 8,
# the mixer at 16384, then the cuda suites.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
BUDGET=${BUDGET:-430}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $O/log.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run sg timeout $(tl 150) .carry/var/sg/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh.txt 2>&1
el "sg conformance wh* rc=$? $(tail -1 $O/conf_wh.txt)"
run sg timeout $(tl 60) .carry/var/sg/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "sg layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
for n in 0 5 3 8; do
  METRALE_WH_SEGMENTS=$n B sg --core --prefill 4096,16384,65536 --samples 15 --json > $O/core_n$n.json 2>>$O/stderr.txt
  el "core nseg=$n rc=$?"
done
B sg --core --prefill 4096,16384,65536 --samples 15 --json > $O/core_auto.json 2>>$O/stderr.txt
el "core auto rc=$?"
for n in 0 auto; do
  if [ $n = auto ]; then unset METRALE_WH_SEGMENTS; else export METRALE_WH_SEGMENTS=$n; fi
  B sg --part mixer --decode 1 --prefill 4096,16384 --samples 15 --json > $O/mixer_$n.json 2>>$O/stderr.txt
  el "mixer nseg=$n rc=$?"
done
unset METRALE_WH_SEGMENTS
export METRALE_TEST_BACKEND=cuda
run sg timeout $(tl 150) .carry/var/sg/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "sg cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run sg timeout $(tl 150) .carry/var/sg/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "sg cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
finish
