#!/bin/bash
# call 4: the early-start gemvs' L2 prefetch made useful. Call 3 found gemv_f32in faster without
# it in the layer (after rmsnorm_f32) and the router's launch at 3-16 tokens faster without it:
# the norms before them never let them start early, so the prefetch was issued right before the
# loads, and the router's grid rows each asked for the same weight rows. `y` = the prefetch by
# the grid's first row only; `t` = y + the norm kernels and f32_to_f16 allowing the next launch
# at their start (mk_allow_next), so that an early-start kernel after them prefetches while they
# run. Against `m` (7a9679b): suites of t, mixer and layer rows as graphs.
cd "$(dirname "$0")/../../../.."
CALL=c4
. scripts/device-call.sh
export METRALE_TEST_BACKEND=cuda
run t timeout 240 .carry/var/t/metrale_conformance --jobs 8 > $O/conf_t.txt 2>&1
echo "t conformance rc=$? $(tail -1 $O/conf_t.txt)" >> $O/log.txt
run t env METRALE_TEST_PRINT_ERRORS=1 timeout 300 .carry/var/t/metrale_layer_tests --jobs 4 > $O/layer_t.txt 2>&1
echo "t layer rc=$? $(tail -1 $O/layer_t.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_t.txt $O/layer_t.txt | head -40 >> $O/log.txt
el suites
for r in 1 2; do
  for v in m y t; do
    B $v --decode 1,2,4,8,64,256 --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
    B $v --part layer --decode 1,2,4,8,16,64,256 --prefill 4096 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
  done
done
el rounds
finish
