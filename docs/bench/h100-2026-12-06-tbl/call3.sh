#!/bin/bash
# 2026-12-06 (fifty-first session): call 2 cut to what ~2 minutes allow (the device time left after
# five refused starts): build w0's (b41bfef) whole-head tests, the core of one sequence with
# METRALE_WH_SEG0 = 16 (equal segments) and the ops' own (22), the mixer both ways, o6 (wh_prep at
# six blocks an SM) beside w0, then the cuda suites on w0.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call3}
BUDGET=${BUDGET:-120}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
for v in w0 o6; do
  run $v timeout $(tl 30) .carry/var/$v/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh_$v.txt 2>&1
  el "$v conformance wh* rc=$? $(tail -1 $O/conf_wh_$v.txt)"
done
run w0 timeout $(tl 30) .carry/var/w0/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "w0 layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
for r in 1 2; do
  for w in 16 auto; do
    if [ $w = auto ]; then unset METRALE_WH_SEG0; else export METRALE_WH_SEG0=$w; fi
    B w0 --core --prefill 8192,16384,65536 --samples 15 --json > $O/core_w${w}_$r.json 2>>$O/stderr.txt
    el "core w0=$w round $r rc=$?"
  done
  unset METRALE_WH_SEG0
  B o6 --core --prefill 16384,65536 --samples 15 --json > $O/o6_core_$r.json 2>>$O/stderr.txt
  B o6 --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/o6_core8_$r.json 2>>$O/stderr.txt
  B w0 --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/w0_core8_$r.json 2>>$O/stderr.txt
  el "o6 and w0 as 8 sequences round $r rc=$?"
done
for w in 16 auto; do
  if [ $w = auto ]; then unset METRALE_WH_SEG0; else export METRALE_WH_SEG0=$w; fi
  B w0 --part mixer --decode 1 --prefill 16384 --samples 15 --json > $O/mixer_w$w.json 2>>$O/stderr.txt
  el "mixer w0=$w rc=$?"
done
unset METRALE_WH_SEG0
export METRALE_TEST_BACKEND=cuda
run w0 timeout $(tl 70) .carry/var/w0/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "w0 cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run w0 timeout $(tl 40) .carry/var/w0/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "w0 cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
finish
