#!/bin/bash
# Fifty-eighth session (2026-12-07): call2.sh (gl, gk, pp against main's kernels, built as tt on
# 8fb5f4b); xt, a timing build (xt.patch: phase 3's chain without the state's turn, wrong outputs,
# no suites), its rows and phase 3 under ncu against tt's; and, when the GPU is an H200, main's rows
# of the issue-6 table (call.sh, build tt).
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-c3}
BUDGET=${BUDGET:-520}
. scripts/device-call.sh
suites pp
# xt's chain is new: a short run first, and its rows only if that ends
run xt timeout 40 .carry/var/xt/metrale bench --backend cuda --core --prefill 4096,16384 --samples 3 > "$O/xt_smoke.txt" 2>&1
xr=$?
el "xt smoke rc=$xr"
XT=; [ $xr = 0 ] && XT=xt
for r in 1 2 3; do
  for v in tt gl gk pp $XT; do prefill_rows $v $r; done
  el "prefill round $r rc=$?"
done
for v in tt gl gk pp; do kernel_view $v wh_prep_qkh 0 phase0$v; done
for v in tt $XT; do kernel_view $v wh_seg 2 phase3$v; done
suites gk
suites gl 'gdn*/*'
if grep -q H200 "$O/gpu.txt"; then
  mkdir -p "$O/table"
  for r in 1 2; do
    O0=$O; O=$O/table; table_rows tt $r; O=$O0
    el "table round $r rc=$?"
  done
fi
finish
