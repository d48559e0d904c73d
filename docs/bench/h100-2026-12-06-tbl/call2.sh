#!/bin/bash
# 2026-12-06 (fifty-first session), with the last ~4 minutes of device time: builds w0 and o6 of
# docs/bench/next (main + w0.patch, main + o6.patch); w0's whole-head tests and layer test, the core of
# one sequence with w0 = 16 (equal segments, main's) and the ops' own (22), o6 beside w0 at 16.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
BUDGET=${BUDGET:-100}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
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
    B w0 --core --prefill 8192,16384,65536 --samples 15 --json > $O/w0_core_w${w}_$r.json 2>>$O/stderr.txt
    el "w0 core w0=$w round $r rc=$?"
  done
  export METRALE_WH_SEG0=16
  B o6 --core --prefill 16384,65536 --samples 15 --json > $O/o6_core_$r.json 2>>$O/stderr.txt
  B o6 --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/o6_core8_$r.json 2>>$O/stderr.txt
  B w0 --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/w0_core8_$r.json 2>>$O/stderr.txt
  el "o6 round $r rc=$?"
  unset METRALE_WH_SEG0
done
finish
