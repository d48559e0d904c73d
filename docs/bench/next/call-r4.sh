#!/bin/bash
# Prepared 2026-12-07 (fifty-ninth session).  Builds: base = main at d21bd6f+ (bench/audit --config, main's
# kernels), r4 = base + r4.patch (gdn_decode_cluster35_r4: the cluster decode kernel for four value heads
# a key head).  r4's suites and audit at the 397B shape; base against r4 at the shapes of Qwen3.5-397B-A17B
# and -122B-A10B (docs/shapes; fused35 against cluster35_r4 up to batch 4) and at the bench's (cluster35 as
# a template: its r <= 2 form must not move).  On an H200 also base's suites and three rounds of the
# issue-6 table.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-r4}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
S397=docs/shapes/qwen3_5_397b_a17b.json
S122=docs/shapes/qwen3_5_122b_a10b.json
run r4 timeout 30 .carry/var/r4/metrale bench --backend cuda --config $S397 --decode 1 --prefill 64 --samples 2 --warmup 1 \
  > "$O/smoke.txt" 2>&1
el "r4 smoke rc=$? $(grep -c cluster35_r4 "$O/smoke.txt") lines name cluster35_r4"
suites r4
run r4 timeout "$(tl 60)" .carry/var/r4/metrale audit --backend cuda --config $S397 > "$O/audit_r4.txt" 2>&1
el "r4 audit rc=$?"
ab() { # round R: base and r4 at the three shapes
  local r=$1
  for v in base r4; do
    B $v --config $S397 --decode 1,2,4,8,64,256 --prefill 4096 --samples 15 --json > "$O/${v}_397_$r.json" 2>>"$O/stderr.txt"
    B $v --config $S122 --decode 1,2,4 --prefill 64 --samples 15 --json > "$O/${v}_122_$r.json" 2>>"$O/stderr.txt"
    B $v --decode 1,2,4,8 --prefill 64 --samples 15 --json > "$O/${v}_a3b_$r.json" 2>>"$O/stderr.txt"
    el "$v round $r rc=$?"
  done
}
ab 1
ab 2
if grep -q H200 "$O/gpu.txt"; then
  suites base
  for r in 1 2 3; do
    table_rows base $r
    el "table round $r rc=$?"
  done
else
  el "not an H200: $(sed -n 2p "$O/gpu.txt"); no table"
fi
ab 3
finish
