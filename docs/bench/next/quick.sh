#!/bin/bash
# The shortest form of call.sh (for ~60 s of device time): q2's new and touched tests only (the conv's
# planes, the whole-head core's phase 0 on them, the layer's prefill paths), then fn against q2 at
# 16384 tokens (core at the bench's gates, mixer), one round.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-quick}
BUDGET=${BUDGET:-60}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run q2 timeout $(tl 30) .carry/var/q2/metrale_conformance --jobs 8 \
  --filter '@(conv/conv1d_prefill_l2norm_qkh|gdn/delta_rule_prefill_chunked_wh_prep_qkh)' > $O/conf_new.txt 2>&1
el "q2 conformance qkh rc=$? $(tail -1 $O/conf_new.txt)"
run q2 timeout $(tl 20) .carry/var/q2/metrale_layer_tests --jobs 8 --filter 'modes/prefill_*' > $O/layer_new.txt 2>&1
el "q2 layer prefill modes rc=$? $(tail -1 $O/layer_new.txt)"
unset METRALE_TEST_BACKEND
for v in fn q2; do
  B $v --core --prefill 16384 --samples 15 --json > $O/${v}_core_1.json 2>>$O/stderr.txt
  B $v --part mixer --prefill 16384 --samples 15 --json > $O/${v}_mixer_1.json 2>>$O/stderr.txt
  el "$v rc=$?"
done
finish
