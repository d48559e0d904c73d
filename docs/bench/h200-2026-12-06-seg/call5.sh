#!/bin/bash
# 2026-12-06: each launch's duration (ncu, gpu__time_duration only) of the core of one sequence at
# 16384 and 65536 tokens in 5 segments (build sg3: phase 2 from shared memory): phase 0, phases 1, 2, 3;
# before them the whole-head tests and the bench (core and mixer, three rounds).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call5}
BUDGET=${BUDGET:-300}
. scripts/device-call.sh
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run sg3 timeout $(tl 120) .carry/var/sg3/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh.txt 2>&1
el "sg3 conformance wh* rc=$? $(tail -1 $O/conf_wh.txt)"
run sg3 timeout $(tl 60) .carry/var/sg3/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "sg3 layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
for r in 1 2 3; do
  B sg3 --core --prefill 4096,16384,65536 --samples 15 --json > $O/core_r$r.json 2>>$O/stderr.txt
  B sg3 --part mixer --prefill 4096,16384 --samples 15 --json > $O/mixer_r$r.json 2>>$O/stderr.txt
done
el "bench done"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for T in 16384 65536; do
  run sg3 timeout $(tl 80) $NCU --kernel-name regex:delta_rule_prefill_chunked --launch-count 4 \
    --metrics gpu__time_duration.sum .carry/var/sg3/metrale bench --backend cuda --core --prefill $T \
    --samples 1 --warmup 0 > $O/ncu_T$T.txt 2>&1
  el "T $T rc=$? $(grep -E 'delta_rule_prefill_chunked[a-z0-9_]*|gpu__time_duration' $O/ncu_T$T.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
done
finish
