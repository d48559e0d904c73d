#!/bin/bash
# Fifty-eighth session (2026-12-07): call2.sh's gk and pp against main's kernels (built as tt on
# 8fb5f4b; gl left out for the carry's 64 MiB: gk holds it); xt, a timing build (xt.patch: phase
# 3's chain without the state's turn, wrong outputs, no suites) and xa (xa.patch: the same chain
# with the algebra's products, its suites first), their rows and phase 3 under ncu against tt's;
# and, when the GPU is an H200, main's rows of the issue-6 table (call.sh, build tt).
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-c3}
BUDGET=${BUDGET:-520}
. scripts/device-call.sh
# xt's and xa's chains are new: a short run first, and their rows only if that ends
XT=
for v in xt xa; do
  run $v timeout 40 .carry/var/$v/metrale bench --backend cuda --core --prefill 4096,16384 --samples 3 > "$O/${v}_smoke.txt" 2>&1
  xr=$?
  el "$v smoke rc=$xr"
  [ $xr = 0 ] && XT="$XT $v"
done
case "$XT" in *xa*) suites xa ;; esac
suites pp
for r in 1 2 3; do
  for v in tt gk pp $XT; do prefill_rows $v $r; done
  el "prefill round $r rc=$?"
done
for v in tt gk pp; do kernel_view $v wh_prep_qkh 0 phase0$v; done
for v in tt $XT; do kernel_view $v wh_seg 2 phase3$v; done
suites gk
if grep -q H200 "$O/gpu.txt"; then
  mkdir -p "$O/table"
  for r in 1 2; do
    O0=$O; O=$O/table; table_rows tt $r; O=$O0
    el "table round $r rc=$?"
  done
fi
finish
