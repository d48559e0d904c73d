#!/bin/bash
# 2026-12-06 (fifty-first session): build w0 (b41bfef: segment 0 weighted, w0 = 22 by the ops at
# 32 heads on 132 SMs; phase 2 register-blocked) on the device: its whole-head conformance tests and
# layer test, then the core of one sequence with METRALE_WH_SEG0 = 16 (equal segments, as before
# w0), the ops' own (22) and 26, in rounds; the mixer at 16384 tokens both ways; build o6 (w0 with
# wh_prep at six blocks an SM: branch o6) beside w0, the core as one and as 8 sequences; the cuda
# suites on w0; each phase's duration (ncu) at 16384 tokens for 16 and the ops' own if time is left.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
for v in w0 o6; do
  run $v timeout $(tl 60) .carry/var/$v/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh_$v.txt 2>&1
  el "$v conformance wh* rc=$? $(tail -1 $O/conf_wh_$v.txt)"
done
run w0 timeout $(tl 60) .carry/var/w0/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "w0 layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
for r in 1 2 3; do
  for w in 16 auto 26; do
    if [ $w = auto ]; then unset METRALE_WH_SEG0; else export METRALE_WH_SEG0=$w; fi
    B w0 --core --prefill 8192,16384,65536 --samples 15 --json > $O/core_w${w}_$r.json 2>>$O/stderr.txt
    el "core w0=$w round $r rc=$?"
  done
done
for w in 16 auto; do
  if [ $w = auto ]; then unset METRALE_WH_SEG0; else export METRALE_WH_SEG0=$w; fi
  B w0 --part mixer --decode 1 --prefill 4096,16384 --samples 15 --json > $O/mixer_w$w.json 2>>$O/stderr.txt
  el "mixer w0=$w rc=$?"
done
unset METRALE_WH_SEG0
for r in 1 2; do
  for v in w0 o6; do
    B $v --core --prefill 16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/${v}_core8_$r.json 2>>$O/stderr.txt
    el "$v core round $r rc=$?"
  done
done
export METRALE_TEST_BACKEND=cuda
run w0 timeout $(tl 150) .carry/var/w0/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "w0 cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run w0 timeout $(tl 150) .carry/var/w0/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "w0 cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for w in 16 auto; do
  if [ $w = auto ]; then unset METRALE_WH_SEG0; else export METRALE_WH_SEG0=$w; fi
  run w0 timeout $(tl 60) $NCU --kernel-name regex:delta_rule_prefill_chunked --launch-count 4 \
    --metrics gpu__time_duration.sum .carry/var/w0/metrale bench --backend cuda --core --prefill 16384 \
    --samples 1 --warmup 0 > $O/ncu_w$w.txt 2>&1
  el "ncu w0=$w rc=$? $(grep -E 'delta_rule_prefill_chunked[a-z0-9_]*|gpu__time_duration' $O/ncu_w$w.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
done
finish
