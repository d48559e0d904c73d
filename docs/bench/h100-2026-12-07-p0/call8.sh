#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session; ran on an H100 as docs/bench/h100-2026-12-07-p0/call7.sh
# with main's kernels built as p1).  Build mn = main (`scripts/device-prepare.sh mn`).  The issue-6
# table's rows on whatever GPU comes (an H200 for the table; on an H100, perf.md's H100 column): two
# rounds of the mixer (decode 1, 8, 64, 256; prefill 4096, 16384), the core at the bench's, slow and
# FlashQLA's gates, and the layer (decode 1, 2, 64, 256; prefill 4096, 16384).
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-table}
BUDGET=${BUDGET:-200}
. scripts/device-call.sh
for r in 1 2; do
  table_rows mn $r
  el "round $r rc=$?"
done
finish
