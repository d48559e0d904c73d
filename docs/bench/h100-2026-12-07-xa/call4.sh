#!/bin/bash
# Fifty-eighth session (2026-12-07), after call3: xa again (xa.patch, Y by a shared-memory plane: the
# first xa and xt had ptxas serialise every wgmma, C7512 and C7520), its suites, three rounds
# against tt (main) and gk, phase 3 under ncu.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-c4}
BUDGET=${BUDGET:-300}
. scripts/device-call.sh
run xa timeout 40 .carry/var/xa/metrale bench --backend cuda --core --prefill 4096,16384 --samples 3 > "$O/xa_smoke.txt" 2>&1
el "xa smoke rc=$?"
suites xa
for r in 1 2 3; do
  for v in tt gk xa; do prefill_rows $v $r; done
  el "prefill round $r rc=$?"
done
for v in tt xa; do kernel_view $v wh_seg 2 phase3$v; done
finish
