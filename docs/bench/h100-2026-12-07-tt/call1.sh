#!/bin/bash
# Fifty-seventh session, call 1 (2026-12-07).  Builds: mn (main, c8ab213) and tt (branch tt at b8033b3:
# phase 0's inverse with its operands split by truncation; perf-prefill.md part 30, recreated from
# its description) and gb (branch gb at b3e2290: phase 0's gates without barriers, same bits).  tt's
# and gb's whole suites, tt's gdn fixture errors (main's T has tc's bits: h100-2026-12-07-p0 call 5 logged them), three rounds of
# prefill_rows for the three in turn, ncu's view of tt's and gb's phase 0, then main's issue-6 table rows
# (two rounds; an H200 was asked for).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-c1}
BUDGET=${BUDGET:-330}
. scripts/device-call.sh
suites tt
suites gb
for v in tt; do
  run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 METRALE_CF_LOG_NMSE=1 timeout $(tl 80) \
    .carry/var/$v/metrale_conformance --jobs 8 --verbose --filter 'gdn*/*' > $O/nmse_$v.txt 2>&1
  el "$v gdn nmse rc=$? $(tail -1 $O/nmse_$v.txt)"
done
for r in 1 2 3; do
  for v in mn tt gb; do prefill_rows $v $r; done
  el "prefill round $r rc=$?"
done
kernel_view tt wh_prep_qkh 0 phase0tt MemoryWorkloadAnalysis_Tables InstructionStats
kernel_view gb wh_prep_qkh 0 phase0gb
for r in 4 5; do
  table_rows mn $r
  el "table round $r rc=$?"
done
finish
