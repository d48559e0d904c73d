#!/bin/bash
# 2026-12-07 (fifty-fourth session), call 3: p6 (branch stage with phase 0 at six blocks an SM,
# what lands on main) through the whole cuda conformance suite and layer suite, then mn against p6
# in three more rounds of the mixer's prefill rows and the core.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call3}
BUDGET=${BUDGET:-300}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run p6 timeout $(tl 100) .carry/var/p6/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "p6 cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run p6 timeout $(tl 60) .carry/var/p6/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "p6 cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
for r in 1 2 3; do
  for v in mn p6; do
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    el "$v round $r rc=$?"
  done
done
B p6 --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/p6_layer.json 2>>$O/stderr.txt
el "p6 layer rc=$?"
run p6 timeout $(tl 30) .carry/var/p6/metrale audit --backend cuda > $O/audit_p6.txt 2>&1
finish
