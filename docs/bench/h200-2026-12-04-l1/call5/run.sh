#!/bin/bash
# call 5: `t2` = call 4's `y` (the gemvs' L2 prefetch by the grid's first row only) + the layer's
# norms (rmsnorm, rmsnorm_f32, rmsnorm_f16, add_rmsnorm) allowing the next launch at their start;
# not f32_to_f16 and the gated norms, which in call 4's `t` cost mixer decode 4 +0.9 us and mixer
# prefill 4096 +3.5. Against `m` (7a9679b) and `t`: suites of t2, layer rows in three rounds,
# mixer rows (m and t2).
cd "$(dirname "$0")/../../../.."
CALL=c5
. scripts/device-call.sh
export METRALE_TEST_BACKEND=cuda
run t2 timeout 240 .carry/var/t2/metrale_conformance --jobs 8 > $O/conf_t2.txt 2>&1
echo "t2 conformance rc=$? $(tail -1 $O/conf_t2.txt)" >> $O/log.txt
run t2 env METRALE_TEST_PRINT_ERRORS=1 timeout 300 .carry/var/t2/metrale_layer_tests --jobs 4 > $O/layer_t2.txt 2>&1
echo "t2 layer rc=$? $(tail -1 $O/layer_t2.txt)" >> $O/log.txt
grep -B2 -A8 "FAIL\|Assert\|CRASH" $O/conf_t2.txt $O/layer_t2.txt | head -40 >> $O/log.txt
run t2 .carry/var/t2/metrale demo --backend cuda > $O/demo_t2.txt 2>&1; echo "demo rc=$?" >> $O/log.txt
el suites
for r in 1 2 3; do
  for v in m t t2; do
    B $v --part layer --decode 1,2,4,8,16,64,256 --prefill 4096,16384 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
  done
done
el layer
for r in 1 2; do
  for v in m t2; do
    B $v --decode 1,4,8,64,256 --prefill 4096 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
  done
done
el rounds
finish
