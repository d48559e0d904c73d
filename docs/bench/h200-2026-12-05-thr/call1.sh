#!/bin/bash
# The fp16 chunked core from 32 tokens a sequence on average (build m: HEAD + threshold32.patch):
# the cuda suites, the core of S sequences of L tokens with the new rule, both paths forced by the
# timing build th (docs/bench/h100-2026-12-05-short/threshold_timing.patch) for the crossover on
# this GPU, and the mixer's rows (whose paths the rule does not touch).
# Carry [".carry"] with .carry/var/{m,th}.
#   BUDGET=480 bash docs/bench/h200-2026-12-05-thr/call1.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run m timeout $(tl 150) .carry/var/m/metrale_conformance --jobs 8 > $O/conf_cuda_m.txt 2>&1
el "m cuda conformance rc=$? $(tail -1 $O/conf_cuda_m.txt)"
run m timeout $(tl 150) .carry/var/m/metrale_layer_tests --jobs 4 > $O/layer_cuda_m.txt 2>&1
el "m layer rc=$? $(tail -1 $O/layer_cuda_m.txt)"
lens() { local s=$1 out= L; for L in 8 16 24 32 40 48 64 128; do out=$out${out:+,}$((L * s)); done; echo $out; }
for S in 1 8 32 128; do
  for path in 1 1000000000; do
    run th env METRALE_TIMING_CHUNKED_MIN=$path timeout $(tl 90) .carry/var/th/metrale bench --backend cuda --core \
      --seqs $S --prefill $(lens $S) --samples 15 --json > $O/th_s${S}_min$path.json 2>>$O/stderr.txt
  done
  run m timeout $(tl 90) .carry/var/m/metrale bench --backend cuda --core --seqs $S --prefill $(lens $S) \
    --samples 15 --json > $O/m_core_s$S.json 2>>$O/stderr.txt
  el "core S=$S"
done
run m timeout $(tl 90) .carry/var/m/metrale bench --backend cuda --samples 15 --json > $O/m_mixer.json 2>>$O/stderr.txt
el mixer
run m timeout $(tl 60) .carry/var/m/metrale audit --backend cuda > $O/audit_m.txt 2>&1
finish
