#!/bin/bash
# 2026-12-06: build sg3: the core of one sequence with slow gates (g in [-1e-3, -1e-4]) in 5 segments
# and with the fp16 kernel (METRALE_WH_SEGMENTS=0); then phase 2 of the segments at 16384 tokens under
# ncu's full set (its 60 us in call5).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call6}
BUDGET=${BUDGET:-200}
. scripts/device-call.sh
for n in 5 0; do
  METRALE_WH_SEGMENTS=$n B sg3 --core --gates slow --prefill 16384,65536 --samples 15 --json > $O/core_slow_n$n.json 2>>$O/stderr.txt
done
el "slow gates done"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
run sg3 timeout $(tl 120) $NCU --kernel-name regex:delta_rule_prefill_chunked_wh_seg --launch-skip 1 --launch-count 1 \
  --set full .carry/var/sg3/metrale bench --backend cuda --core --prefill 16384 --samples 1 --warmup 0 > $O/ncu_phase2.txt 2>&1
el "ncu phase 2 rc=$?"
finish
