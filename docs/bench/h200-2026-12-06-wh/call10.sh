#!/bin/bash
# 2026-12-06: the ops' rule where sequences are short (build mm = main b434b3c): the core at 16384
# tokens as 128, 256 and 512 sequences (128, 64 and 32 tokens each) and at 65536 as 8 and 32, with
# the whole-head kernel (off=0) and without (off=1), alternating.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call10}
. scripts/device-call.sh
for spec in 16384:128 16384:256 16384:512 65536:8 65536:32; do
  T=${spec%:*}; n=${spec#*:}
  for off in 0 1; do
    METRALE_NO_WHOLE_HEAD=$off B mm --core --prefill $T --seqs $n --samples 15 --json > $O/core_T${T}_s${n}_off${off}.json 2>>$O/stderr.txt
    el "$T x $n off=$off rc=$?"
  done
done
finish
