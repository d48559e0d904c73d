#!/bin/bash
# 2026-12-06: build sg again (call1's): the core of one sequence at 8192 and 12288 tokens for
# METRALE_WH_SEGMENTS = 0, 3, 4, 5; 16384 for 4, 6, 7; then 16384 and the mixer's 16384 in turn
# with 0 and 5, two rounds.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
BUDGET=${BUDGET:-300}
. scripts/device-call.sh
for n in 0 3 4 5; do
  METRALE_WH_SEGMENTS=$n B sg --core --prefill 8192,12288 --samples 15 --json > $O/core_mid_n$n.json 2>>$O/stderr.txt
done
for n in 4 6 7; do
  METRALE_WH_SEGMENTS=$n B sg --core --prefill 16384 --samples 15 --json > $O/core16_n$n.json 2>>$O/stderr.txt
done
for r in 1 2; do
  for n in 0 5; do
    METRALE_WH_SEGMENTS=$n B sg --core --prefill 16384,65536 --samples 15 --json > $O/core_r${r}_n$n.json 2>>$O/stderr.txt
    METRALE_WH_SEGMENTS=$n B sg --part mixer --prefill 16384 --samples 15 --json > $O/mixer_r${r}_n$n.json 2>>$O/stderr.txt
  done
done
el "done"
finish
