#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session).  Builds: tc (fdd5b59: main's kernels since the merge
# of tc) and p1 (branch p1: phase 0's K K^T fragments by ldmatrix, Tb's rows 0..47 written during
# the inverse's last block; docs/perf-prefill.md part 30).  p1's cuda suites, three rounds of the
# core's rows and the mixer's prefill for both builds in turn, ncu's source view of p1's phase 0.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-p1}
BUDGET=${BUDGET:-420}
. scripts/device-call.sh
suites p1
for r in 1 2 3; do
  for v in tc p1; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
  done
  el "round $r rc=$?"
done
kernel_view p1 wh_prep_qkh 0 phase0 MemoryWorkloadAnalysis_Tables
finish
