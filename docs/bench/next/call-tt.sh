#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session; its device time ran out before it could run).  Builds:
# mn (main: `scripts/device-prepare.sh mn`) and tt (branch tt at 48d29c9: phase 0's inverse with its
# operands split by truncation, one instruction where cvt.rna.tf32 is emulated; docs/perf-prefill.md
# part 30).  tt's gdn conformance tests, then two rounds of the core at 16384 and 65536 tokens for
# both.  Before landing tt: its whole suites and prefill_rows.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-tt}
BUDGET=${BUDGET:-75}
. scripts/device-call.sh
run tt env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 timeout $(tl 40) \
  .carry/var/tt/metrale_conformance --jobs 8 --filter 'gdn*/*' > $O/conf_gdn_tt.txt 2>&1
el "tt gdn conformance rc=$? $(tail -1 $O/conf_gdn_tt.txt)"
for r in 1 2; do
  for v in mn tt; do
    B $v --core --prefill 16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
  done
  el "round $r rc=$?"
done
finish
