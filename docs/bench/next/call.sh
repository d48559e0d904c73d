#!/bin/bash
# Prepared 2026-12-07 (fifty-fourth session): main's rows of the issue-6 table on an H200.  Builds:
# p6 (what main runs since 914f1d2: the planes pair, p2zero, the staged conv, phase 0 at six blocks;
# built at a1894fe + the six-block patch, comments aside the same code) and mn (main at 36f9e43,
# before the staged conv and the six blocks).  p6's cuda conformance and layer suites, its audit,
# then two rounds of the table's rows for p6 and the core and mixer prefill rows for mn.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-h200}
BUDGET=${BUDGET:-280}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run p6 timeout $(tl 100) .carry/var/p6/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "p6 cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run p6 timeout $(tl 60) .carry/var/p6/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "p6 cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
run p6 timeout $(tl 30) .carry/var/p6/metrale audit --backend cuda > $O/audit_p6.txt 2>&1
for r in 1 2; do
  B p6 --samples 15 --json > $O/p6_mixer_$r.json 2>>$O/stderr.txt
  B p6 --core --prefill 4096,16384,65536 --samples 15 --json > $O/p6_core_$r.json 2>>$O/stderr.txt
  B p6 --core --gates slow --prefill 4096,16384,65536 --samples 15 --json > $O/p6_slow_$r.json 2>>$O/stderr.txt
  B p6 --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/p6_peer_$r.json 2>>$O/stderr.txt
  el "p6 round $r rc=$?"
  B mn --part mixer --prefill 4096,16384 --samples 15 --json > $O/mn_mixer_$r.json 2>>$O/stderr.txt
  B mn --core --prefill 4096,16384,65536 --samples 15 --json > $O/mn_core_$r.json 2>>$O/stderr.txt
  el "mn round $r rc=$?"
  B p6 --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/p6_layer_$r.json 2>>$O/stderr.txt
  el "p6 layer round $r rc=$?"
done
finish
