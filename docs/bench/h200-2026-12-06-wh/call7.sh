#!/bin/bash
# 2026-12-06: each kernel's duration (ncu, gpu__time_duration only) of the core at 16384 tokens as
# 1 and 8 sequences, whole-head (off=0) and fp16 (off=1); build wh (7th commit).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call7}
. scripts/device-call.sh
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for n in 1 8; do
  for off in 0 1; do
    METRALE_NO_WHOLE_HEAD=$off run wh timeout $(tl 100) $NCU --kernel-name regex:delta_rule_prefill_chunked --launch-count 2 \
      --metrics gpu__time_duration.sum .carry/var/wh/metrale bench --backend cuda --core --prefill 16384 --seqs $n \
      --samples 1 --warmup 0 > $O/ncu_s${n}_off${off}.txt 2>&1
    el "seqs $n off $off rc=$? $(grep -E 'delta_rule_prefill_chunked[a-z0-9_]*|gpu__time_duration' $O/ncu_s${n}_off${off}.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
  done
done
finish
