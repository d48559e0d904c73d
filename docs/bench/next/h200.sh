#!/bin/bash
# Prepared 2026-12-07 (fifty-ninth session).  Build mn = main (`scripts/device-prepare.sh mn`).  The
# issue-6 table on an H200 only: on any other GPU it stops after recording which one came (perf.md's
# H100 column already has main's rows).  mn's suites and audit, then three rounds of the table's rows.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-h200}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
if ! grep -q H200 "$O/gpu.txt"; then
  el "not an H200: $(sed -n 2p "$O/gpu.txt"); stopped"
  finish
  exit 0
fi
suites mn
run mn timeout "$(tl 60)" .carry/var/mn/metrale audit --backend cuda > "$O/audit_mn.txt" 2>&1
el "mn audit rc=$?"
for r in 1 2 3; do
  table_rows mn $r
  el "round $r rc=$?"
done
finish
