#!/bin/bash
# Prepared in the fifty-seventh session (2026-12-07; its device time ran out).  Builds, on main
# (docs/bench/next/README.md): tt = main's kernels (`scripts/device-prepare.sh tt`), gl (gl.patch:
# phase 0 loads its gates before it issues the chunk's copies, same bits), gk (gl.patch, then
# gk.patch: k's plane by one bulk copy, same bits) and pp (gl, gk, then pp.patch: phase 0 of the
# planes on six blocks an SM, each making its next item's setup during its solve; same bits, a new
# grid contract and conformance cases).  pp's and gk's whole suites, gl's gdn conformance tests and
# layer suite, three rounds of prefill_rows for the four in turn, ncu's view of each one's phase 0.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-c2}
BUDGET=${BUDGET:-330}
. scripts/device-call.sh
suites pp
for r in 1 2 3; do
  for v in tt gl gk pp; do prefill_rows $v $r; done
  el "prefill round $r rc=$?"
done
for v in tt gl gk pp; do kernel_view $v wh_prep_qkh 0 phase0$v; done
suites gk
suites gl 'gdn*/*'
finish
