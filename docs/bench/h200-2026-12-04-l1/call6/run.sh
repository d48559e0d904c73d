#!/bin/bash
# call 6: `k` = `h` (35579bb, main's head) + moe_topk_rows letting the next launch start at its
# start (mk_allow_next): at 1-2 and 17-40 tokens the routed gate and up rows, an early-start
# launch, then become resident while the top-k runs instead of after it. Against `h`: moe
# conformance and layer suite of k, layer rows in three rounds.
cd "$(dirname "$0")/../../../.."
CALL=c6
. scripts/device-call.sh
export METRALE_TEST_BACKEND=cuda
run k timeout 200 .carry/var/k/metrale_conformance --jobs 8 --filter 'moe/*' > $O/conf_moe_k.txt 2>&1
echo "k moe conformance rc=$? $(tail -1 $O/conf_moe_k.txt)" >> $O/log.txt
run k timeout 300 .carry/var/k/metrale_layer_tests --jobs 4 > $O/layer_k.txt 2>&1
echo "k layer rc=$? $(tail -1 $O/layer_k.txt)" >> $O/log.txt
el suites
for r in 1 2 3; do
  for v in h k; do
    B $v --part layer --decode 1,2,3,17,24,32 --prefill 4096 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
  done
done
el rounds
finish
