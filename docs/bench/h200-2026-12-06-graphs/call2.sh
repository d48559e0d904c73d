#!/bin/bash
# 2026-12-06 (forty-seventh session), second call.  Builds, made by scripts/device-prepare.sh:
#   n2  main at 93c9f66: the cache of 27bffe4, and bench samples in whole rounds of --cycle
#   o2  n2 + eight_lru2.patch (8 recordings, replaced at once: what the FIFO of 8 did to keys going
#       round), with the same bench
#   t   main at ef54f06 (the forty-third session's table code), prepared from a worktree of it
# `bench --cycle` of n2 and o2 (12 and 16 batch sizes going round, mixer and layer; n2 eager beside
# them), the layer rows of t and n2 in turn (decode 64 and 256 came out 12-19 us above the table in
# both of this machine's last calls), then n2's cuda conformance and layer suites.
# Carry [".carry"].
#   BUDGET=540 bash docs/bench/h200-2026-12-06-graphs/call2.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
for round in 1 2 3; do
  for v in t n2; do
    B $v --part layer --samples 15 --json > $O/${v}_layer_r$round.json 2>>$O/stderr.txt
    el "$v layer round $round rc=$?"
  done
  for sizes in 1,2,3,4,5,6,7,8,9,10,11,12 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16; do
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
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run n2 timeout $(tl 150) .carry/var/n2/metrale_conformance --jobs 8 > $O/conf_cuda_n2.txt 2>&1
el "n2 cuda conformance rc=$? $(tail -1 $O/conf_cuda_n2.txt)"
run n2 timeout $(tl 200) .carry/var/n2/metrale_layer_tests --jobs 8 > $O/layer_cuda_n2.txt 2>&1
el "n2 cuda layer rc=$? $(tail -1 $O/layer_cuda_n2.txt)"
unset METRALE_TEST_BACKEND
run n2 .carry/var/n2/metrale audit --backend cuda > $O/audit_n2.txt 2>&1
finish
