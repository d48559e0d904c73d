#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session).  Builds: p0 (0306abc: main's kernels since the merge
# of p0) and a4 (branch a4 at d7fea39: phase 0's K K^T and A on four warps, five 16x8 tiles each;
# docs/perf-prefill.md part 30).  a4's cuda suites, three rounds of the core's rows and the mixer's
# prefill for both builds in turn, ncu's source view of a4's phase 0.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-a4}
BUDGET=${BUDGET:-420}
. scripts/device-call.sh
suites a4
for r in 1 2 3; do
  for v in p0 a4; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
  done
  el "round $r rc=$?"
done
kernel_view a4 wh_prep_qkh 0 phase0 MemoryWorkloadAnalysis_Tables
finish
