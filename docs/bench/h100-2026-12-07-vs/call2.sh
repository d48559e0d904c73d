#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session).  Builds: mn (main at 3e62fa4), vs (f7f607e: planes put
# before their range tests) and vp (127e9b1 = vs + each chunk's inputs asked of L2 a chain step
# before their copies; docs/perf-prefill.md part 30).  vp's cuda suites, three rounds of the core's
# rows and the mixer's prefill for the three builds in turn, ncu's source view of vp's phase 3.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-vp}
BUDGET=${BUDGET:-420}
. scripts/device-call.sh
suites vp
for r in 1 2 3; do
  for v in mn vs vp; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 16384,65536 --samples 15 --json > $O/${v}_slow_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
  done
  el "round $r rc=$?"
done
phase3_view vp
finish
