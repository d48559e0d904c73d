#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session).  Builds: mn (main at 3e62fa4: v by TMA and vr) and vs
# (branch vs at f7f607e: the state's S, the values' R and Dn put before their range tests, so that
# the planes' stores drain while the maxima are found; docs/perf-prefill.md part 30).  vs's cuda
# suites first, then three rounds of the core's rows (bench's, slow and FlashQLA's gates) and the
# mixer's prefill for both builds in turn, then ncu's source view of vs's phase 3 at 16384 tokens.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-vs}
BUDGET=${BUDGET:-420}
. scripts/device-call.sh
suites vs
for r in 1 2 3; do
  for v in mn vs; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 16384 --samples 15 --json > $O/${v}_slow_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
  done
  el "round $r rc=$?"
done
phase3_view vs
finish
