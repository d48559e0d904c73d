#!/bin/bash
# Prepared 2026-12-07 (sixtieth session).  Builds: base = main (fee9008's kernels; bench/audit --config),
# r4q = base + r4.patch + pair_r4.patch: gdn_decode_cluster35_r4 (decode up to batch 4) and
# gdn_decode_pair35_r4 (from batch 5; the pair kernel in clusters of 4) for four value heads a key
# head (Qwen3.5-397B-A17B, -122B-A10B: docs/shapes), which take gdn_decode_fused35 at every batch on
# main.  r4q's suites, the sanitizers on the new kernels' tests, its audit at the 397B shape; base
# against r4q at both shapes and at the bench's (cluster35 and pair35 as templates: their r <= 2
# forms must not move).  On an H200 also base's suites and three rounds of the issue-6 table.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-r4q}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
S397=docs/shapes/qwen3_5_397b_a17b.json
S122=docs/shapes/qwen3_5_122b_a10b.json
run r4q timeout 30 .carry/var/r4q/metrale bench --backend cuda --config $S397 --decode 1,8 --prefill 64 --samples 2 \
  --warmup 1 > "$O/smoke.txt" 2>&1
el "r4q smoke rc=$? $(grep -c '_r4' "$O/smoke.txt") lines name an _r4 kernel"
suites r4q
for t in memcheck racecheck synccheck; do
  run r4q env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 timeout "$(tl 60)" \
    /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/r4q/metrale_conformance --jobs 1 \
    --filter 'gdn_decode/*_r4*' > "$O/${t}_r4.txt" 2>&1
  el "r4q $t rc=$? $(tail -1 "$O/${t}_r4.txt")"
done
run r4q timeout "$(tl 60)" .carry/var/r4q/metrale audit --backend cuda --config $S397 > "$O/audit_r4q.txt" 2>&1
el "r4q audit rc=$?"
ab() { # round R: base and r4q at the three shapes
  local r=$1
  for v in base r4q; do
    B $v --config $S397 --decode 1,2,4,5,8,16,64,256 --prefill 64 --samples 15 --json > "$O/${v}_397_$r.json" 2>>"$O/stderr.txt"
    B $v --config $S122 --decode 1,4,8,64 --prefill 64 --samples 15 --json > "$O/${v}_122_$r.json" 2>>"$O/stderr.txt"
    B $v --decode 1,2,4,8,64,256 --prefill 64 --samples 15 --json > "$O/${v}_a3b_$r.json" 2>>"$O/stderr.txt"
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
