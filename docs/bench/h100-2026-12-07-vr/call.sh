#!/bin/bash
# Prepared 2026-12-07 (fifty-fifth session).  Builds: mn (main at or after 42665e1: v into the
# whole-head core by TMA) and vr (branch vr at b3f5e37: the state's exponent moved only where its
# largest |S| leaves [2^3, 2^9), S's plane put without multiplies then, the values' R of a whole
# chunk without the row tests; docs/perf-prefill.md part 29's Next).  In the order of what matters
# most should the device time run out: vr's and mn's cuda suites, mn's audit, two rounds of the
# issue-6 table's rows for mn (mixer, core at the bench's, slow and FlashQLA's gates, layer) with
# the core's rows for vr beside them, then ncu's source view of vr's phase 3 at 16384 tokens (as
# docs/bench/h100-2026-12-07-tma/call2.sh's).  An H200 for the table; on an H100, the A/B and the
# H100 column of perf.md.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-h200}
BUDGET=${BUDGET:-400}
. scripts/device-call.sh
suites vr
suites mn
run mn timeout $(tl 30) .carry/var/mn/metrale audit --backend cuda > $O/audit_mn.txt 2>&1
for r in 1 2; do
  B mn --samples 15 --json > $O/mn_mixer_$r.json 2>>$O/stderr.txt
  for v in mn vr; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_slow_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
  done
  B vr --part mixer --prefill 4096,16384 --samples 15 --json > $O/vr_mixer_$r.json 2>>$O/stderr.txt
  B mn --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/mn_layer_$r.json 2>>$O/stderr.txt
  el "round $r rc=$?"
done
phase3_view vr
finish
