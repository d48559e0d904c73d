#!/bin/bash
# 2026-12-06: the whole-head core against the fp16 kernel over sequence counts.  Build wh (branch
# wh, 6th commit: phase 0's packing unrolled, Q S after K S).  Its conformance cases; the core at
# 16384 tokens as 1, 2, 4, 8 and 32 sequences and at 4096 as 1 and 8, with the whole-head kernel
# (off=0) and without (off=1, the fp16 kernel), alternating.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call5}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run wh timeout $(tl 120) .carry/var/wh/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh.txt 2>&1
el "wh conformance rc=$? $(tail -1 $O/conf_wh.txt)"
unset METRALE_TEST_BACKEND
for n in 1 2 4 8 32; do
  for off in 0 1; do
    METRALE_NO_WHOLE_HEAD=$off B wh --core --prefill 16384 --seqs $n --samples 15 --json > $O/core_T16384_s${n}_off${off}.json 2>>$O/stderr.txt
    el "16384 x $n off=$off rc=$?"
  done
done
for n in 1 8; do
  for off in 0 1; do
    METRALE_NO_WHOLE_HEAD=$off B wh --core --prefill 4096 --seqs $n --samples 15 --json > $O/core_T4096_s${n}_off${off}.json 2>>$O/stderr.txt
    el "4096 x $n off=$off rc=$?"
  done
done
finish
