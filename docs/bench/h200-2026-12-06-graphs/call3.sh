#!/bin/bash
# 2026-12-06 (forty-seventh session), third call: call 2's builds (n2 = main at 93c9f66, o2 = n2 +
# eight_lru2.patch) on whatever GPU comes: n2's cuda conformance and layer suites (main's own
# copy_h2d; call 1's H200 suites ran a timing build), then `bench --cycle` of n2, o2 and n2 eager
# (12 batch sizes, mixer and layer, one round) with samples in whole rounds.
# Carry [".carry"] (.carry/var/n2 and o2).
#   BUDGET=200 bash docs/bench/h200-2026-12-06-graphs/call3.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call3}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run n2 timeout $(tl 150) .carry/var/n2/metrale_conformance --jobs 8 > $O/conf_cuda_n2.txt 2>&1
el "n2 cuda conformance rc=$? $(tail -1 $O/conf_cuda_n2.txt)"
run n2 timeout $(tl 200) .carry/var/n2/metrale_layer_tests --jobs 8 > $O/layer_cuda_n2.txt 2>&1
el "n2 cuda layer rc=$? $(tail -1 $O/layer_cuda_n2.txt)"
unset METRALE_TEST_BACKEND
for round in 1; do
  for sizes in 1,2,3,4,5,6,7,8,9,10,11,12; do
    for part in mixer layer; do
      for cfg in n2 o2 n2-eager; do
        v=${cfg%-eager}; flag=; [ $cfg = n2-eager ] && flag=--no-graphs
        B $v --part $part --cycle --decode $sizes --prefill 64 --samples 15 $flag --json \
          > $O/${cfg}_cycle_${part}_$(echo $sizes | tr , _ | cut -c1-40)_r$round.json 2>>$O/stderr.txt
        el "$cfg cycle $part ${sizes##*,} sizes round $round rc=$?"
      done
    done
  done
done
finish
