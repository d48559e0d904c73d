#!/bin/bash
# 2026-12-06: the review's mends (build rv = main with them): the cuda conformance suite, the
# whole-head layer test, and the core at 16384 tokens as 8 sequences (mm is carried but its
# kernels are not run; the figure to compare is call11's wh2, 461-463 us).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call13}
. scripts/device-call.sh
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run rv timeout $(tl 120) .carry/var/rv/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "rv cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run rv timeout $(tl 100) .carry/var/rv/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "rv layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
B rv --core --prefill 16384 --seqs 8 --samples 15 --json > $O/rv_core8.json 2>>$O/stderr.txt
el "rv core 8 rc=$?"
finish
