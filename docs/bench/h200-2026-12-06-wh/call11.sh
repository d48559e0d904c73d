#!/bin/bash
# 2026-12-06: phase 0 without v's packing (build wh2 = branch wh2 at its first commit: the scan reads
# v's rows from vh) against main (mm).  wh2's cuda conformance suite and the layer test that runs
# the whole-head kernel; the core at 16384 tokens as 8 and 32 sequences and 65536 as 8, mm and wh2
# in turn, two rounds; each kernel's duration under ncu at 16384 x 8 for both.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call11}
. scripts/device-call.sh
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run wh2 timeout $(tl 120) .carry/var/wh2/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "wh2 cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run wh2 timeout $(tl 100) .carry/var/wh2/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "wh2 layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
for round in 1 2; do
  for v in mm wh2; do
    for spec in 16384:8 16384:32 65536:8; do
      T=${spec%:*}; n=${spec#*:}
      B $v --core --prefill $T --seqs $n --samples 15 --json > $O/${v}_T${T}_s${n}_r$round.json 2>>$O/stderr.txt
      el "$v $T x $n round $round rc=$?"
    done
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for v in mm wh2; do
  run $v timeout $(tl 60) $NCU --kernel-name regex:delta_rule_prefill_chunked --launch-count 2 --metrics gpu__time_duration.sum \
    .carry/var/$v/metrale bench --backend cuda --core --prefill 16384 --seqs 8 --samples 1 --warmup 0 > $O/ncu_$v.txt 2>&1
  el "$v ncu: $(grep -E '^  delta_rule|gpu__time_duration' $O/ncu_$v.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
finish
