#!/bin/bash
# 2026-12-06: the mixer as 8 sequences on main's kernels after v's packing went (build wh2, the same
# code as main 1befefd), with the whole-head core and without (METRALE_NO_WHOLE_HEAD=1), two rounds.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call12}
. scripts/device-call.sh
for round in 1 2; do
  for off in 0 1; do
    METRALE_NO_WHOLE_HEAD=$off B wh2 --part mixer --decode 1 --prefill 4096,16384 --seqs 8 --samples 15 --json > $O/mixer8_off${off}_r$round.json 2>>$O/stderr.txt
    el "mixer 8 seqs off=$off round $round rc=$?"
  done
done
finish
