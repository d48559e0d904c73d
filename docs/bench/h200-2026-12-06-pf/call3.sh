#!/bin/bash
# 2026-12-06 (forty-eighth session), call 3: the core at the lengths of FlashQLA's published H200
# table (2048 to 32768 tokens, one sequence) and 65536, with the bench's fast gates and with slow
# ones, three rounds; the mixer's default rows once.  Build m = main at 127c601.  Carry [".carry"].
#   BUDGET=400 bash docs/bench/h200-2026-12-06-pf/call3.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call3}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
for round in 1 2 3; do
  for gates in fast slow; do
    B m --core --gates $gates --prefill 2048,4096,8192,16384,32768,65536 --samples 15 --json \
      > $O/m_core_${gates}_r$round.json 2>>$O/stderr.txt
    el "m core $gates round $round rc=$?"
  done
done
B m --part mixer --samples 15 --json > $O/m_mixer.json 2>>$O/stderr.txt
el "m mixer rc=$?"
finish
