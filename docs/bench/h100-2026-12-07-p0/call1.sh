#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session).  Build vs (f7f607e: main's kernels since 3484535).
# ncu's source view, with the shared-memory tables, of the whole-head core's phase 0
# (delta_rule_prefill_chunked_wh_prep_qkh) and phase 1 (wh_seg's first launch) at 16384 tokens:
# where phase 0's ~117 us go (docs/perf-prefill.md part 30).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-p0}
BUDGET=${BUDGET:-300}
. scripts/device-call.sh
kernel_view vs wh_prep_qkh 0 phase0 MemoryWorkloadAnalysis_Tables InstructionStats Occupancy
kernel_view vs wh_seg 0 phase1
B vs --core --prefill 16384 --samples 15 --json > $O/vs_core.json 2>>$O/stderr.txt
finish
