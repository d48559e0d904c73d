#!/bin/bash
# 2026-12-06 (forty-seventh session): the layer's cache of recorded decode steps, and small host
# copies as stream write operations.  Builds, made by scripts/device-prepare.sh:
#   n  main at 27bffe4: 32 recordings, the least recently replayed one replaced once 64 steps idle
#   o  main at 35d0c3b (n + the conformance test named at m) + eight_lru.patch: 8 recordings, the least
#      recently replayed replaced at once (what the FIFO of 8 before 27bffe4 does to keys going round)
#   m  main at 35d0c3b (n + the conformance test memory/small_host_copies_at_every_alignment) +
#      memop_h2d.patch: copy_h2d of up to 255 4- or 8-byte words by cuStreamBatchMemOp
# What one recording costs to keep (graph_mem, carried as .carry/graph_mem); `bench --cycle` of n
# and o (12 and 16 batch sizes going round, mixer and layer; n eager beside them); `bench
# --new-slots` of n and m; the cuda conformance and layer suites of m (the layer suite has the
# graph_cache test, here on real graphs); m's audit; n's layer rows (the forty-sixth session's one
# round put decode 64 and 256 14 and 19 us above the table).  Carry [".carry"].
#   BUDGET=540 bash docs/bench/h200-2026-12-06-graphs/call1.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
for nodes in 3 12; do
  timeout 60 .carry/graph_mem $nodes 1000 >> $O/graph_mem.txt 2>&1
  el "graph_mem $nodes rc=$? $(tail -1 $O/graph_mem.txt)"
done
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run m timeout $(tl 150) .carry/var/m/metrale_conformance --jobs 8 > $O/conf_cuda_m.txt 2>&1
el "m cuda conformance rc=$? $(tail -1 $O/conf_cuda_m.txt)"
run m timeout $(tl 200) .carry/var/m/metrale_layer_tests --jobs 8 > $O/layer_cuda_m.txt 2>&1
el "m cuda layer rc=$? $(tail -1 $O/layer_cuda_m.txt)"
unset METRALE_TEST_BACKEND
run m .carry/var/m/metrale audit --backend cuda > $O/audit_m.txt 2>&1
for round in 1 2 3; do
  for v in n m; do
    for part in mixer layer; do
      B $v --part $part --new-slots --decode 1,8,64,256 --prefill 64 --samples 15 --json \
        > $O/${v}_new_${part}_r$round.json 2>>$O/stderr.txt
      el "$v new slots $part round $round rc=$?"
    done
  done
  for sizes in 1,2,3,4,5,6,7,8,9,10,11,12 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16; do
    for part in mixer layer; do
      for cfg in n o n-eager; do
        v=${cfg%-eager}; flag=; [ $cfg = n-eager ] && flag=--no-graphs
        B $v --part $part --cycle --decode $sizes --prefill 64 --samples 15 $flag --json \
          > $O/${cfg}_cycle_${part}_$(echo $sizes | tr , _ | cut -c1-40)_r$round.json 2>>$O/stderr.txt
        el "$cfg cycle $part ${sizes##*,} sizes round $round rc=$?"
      done
    done
  done
done
for round in 1 2 3; do
  B n --part layer --samples 15 --json > $O/n_layer_r$round.json 2>>$O/stderr.txt
  el "n layer round $round rc=$?"
done
finish
