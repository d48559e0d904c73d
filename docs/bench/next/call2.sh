#!/bin/bash
# Fifty-seventh session, call 2 (2026-12-07).  Builds: tt (main's kernels since the merge e9b08e5:
# branch tt at b8033b3), gl (branch gl at 261b5cb: phase 0 loads its gates before it issues the
# chunk's copies, same bits) and gk (branch gk at 6bb3281: gl, and k's plane by one bulk copy on
# sm_90, same bits).  Three rounds of prefill_rows for the three in turn, ncu's view of each one's
# phase 0, gk's whole suites, gl's gdn conformance tests and layer suite.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-c2}
BUDGET=${BUDGET:-180}
. scripts/device-call.sh
for r in 1 2 3; do
  for v in tt gl gk; do prefill_rows $v $r; done
  el "prefill round $r rc=$?"
done
for v in tt gl gk; do kernel_view $v wh_prep_qkh 0 phase0$v; done
suites gk
suites gl 'gdn*/*'
finish
