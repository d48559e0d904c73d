#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session).  Builds: vs (f7f607e: main's kernels since 3484535)
# and p0 (branch p0 at 0306abc: phase 0's blocked inverse two rows x four columns a lane, Tb's T
# read by 16-byte words; docs/perf-prefill.md part 30).  p0's cuda suites, three rounds of the
# core's rows and the mixer's prefill for both builds in turn, ncu's source view of p0's phase 0.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-p0}
BUDGET=${BUDGET:-420}
. scripts/device-call.sh
suites p0
for r in 1 2 3; do
  for v in vs p0; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
  done
  el "round $r rc=$?"
done
kernel_view p0 wh_prep_qkh 0 phase0 MemoryWorkloadAnalysis_Tables
finish
