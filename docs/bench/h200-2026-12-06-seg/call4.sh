#!/bin/bash
# 2026-12-06: each launch's duration (ncu, gpu__time_duration only) of the core of one sequence at
# 16384 and 65536 tokens in 5 segments (build sg2): phase 0, phases 1, 2, 3.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call4}
BUDGET=${BUDGET:-200}
. scripts/device-call.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for T in 16384 65536; do
  run sg2 timeout $(tl 80) $NCU --kernel-name regex:delta_rule_prefill_chunked --launch-count 4 \
    --metrics gpu__time_duration.sum .carry/var/sg2/metrale bench --backend cuda --core --prefill $T \
    --samples 1 --warmup 0 > $O/ncu_T$T.txt 2>&1
  el "T $T rc=$? $(grep -E 'delta_rule_prefill_chunked[a-z0-9_]*|gpu__time_duration' $O/ncu_T$T.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
done
finish
