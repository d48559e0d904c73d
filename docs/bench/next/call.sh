#!/bin/bash
# Prepared 2026-12-07 (fifty-fifth session): main's rows of the issue-6 table on an H200, build mn
# (main at or after 42665e1: v into the whole-head core by TMA).  mn's cuda conformance and layer
# suites, its audit, then two rounds of the table's rows: the mixer (decode and prefill), the core
# at the bench's, slow and FlashQLA's gates, the layer.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-h200}
BUDGET=${BUDGET:-280}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
suites mn
run mn timeout $(tl 30) .carry/var/mn/metrale audit --backend cuda > $O/audit_mn.txt 2>&1
for r in 1 2; do
  B mn --samples 15 --json > $O/mn_mixer_$r.json 2>>$O/stderr.txt
  B mn --core --prefill 4096,16384,65536 --samples 15 --json > $O/mn_core_$r.json 2>>$O/stderr.txt
  B mn --core --gates slow --prefill 4096,16384,65536 --samples 15 --json > $O/mn_slow_$r.json 2>>$O/stderr.txt
  B mn --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/mn_peer_$r.json 2>>$O/stderr.txt
  B mn --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/mn_layer_$r.json 2>>$O/stderr.txt
  el "mn round $r rc=$?"
done
finish
