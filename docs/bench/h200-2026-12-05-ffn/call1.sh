#!/bin/bash
# 2026-12-05 (forty-fifth session), run once on an H100: the MoE FFN in chunks of 16384
# tokens where the grouped ws kernels run, instead of 4096 (docs/perf-moe.md, last section: the
# count and the prediction).  Builds, made by scripts/device-prepare.sh at main's head (3b1641d or
# later, if the patches still apply):
#   m  main's head
#   c  m + chunk16384.patch (the change)
#   t  c + chunk_timing.patch: METRALE_TIMING_FFN_CHUNK forces the chunk (4096 = m's behaviour)
# The cuda suites on c (the layer suite's modes/prefill_longer_than_an_ffn_chunk_equals_split then
# runs 16484 tokens through two chunks on the grouped kernels), the layer's prefills at chunks
# 4096 / 8192 / 16384 from t, m against c on the layer's and the mixer's rows, ncu of the FFN's
# kernels in a 16384-token layer prefill at chunks 4096 and 16384.
# Carry [".carry"] with .carry/var/{m,c,t}.
#   BUDGET=540 bash docs/bench/h200-2026-12-05-ffn/call1.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run c timeout $(tl 150) .carry/var/c/metrale_conformance --jobs 8 > $O/conf_cuda_c.txt 2>&1
el "c cuda conformance rc=$? $(tail -1 $O/conf_cuda_c.txt)"
run c timeout $(tl 150) .carry/var/c/metrale_layer_tests --jobs 4 > $O/layer_cuda_c.txt 2>&1
el "c layer rc=$? $(tail -1 $O/layer_cuda_c.txt)"
for round in 1 2; do
  for ch in 4096 8192 16384; do
    run t env METRALE_TIMING_FFN_CHUNK=$ch timeout $(tl 60) .carry/var/t/metrale bench --backend cuda --part layer \
      --decode 64 --prefill 4096,8192,16384,32768 --samples 11 --json > $O/t_ch${ch}_r$round.json 2>>$O/stderr.txt
    el "t chunk $ch round $round rc=$?"
  done
done
for round in 1 2; do
  for v in m c; do
    B $v --part layer --samples 15 --json > $O/${v}_layer_r$round.json 2>>$O/stderr.txt
    el "$v layer round $round rc=$?"
  done
done
B c --samples 15 --json > $O/c_mixer.json 2>>$O/stderr.txt
el "c mixer rc=$?"
for ch in 4096 16384; do
  run t env METRALE_TIMING_FFN_CHUNK=$ch timeout $(tl 90) /usr/local/cuda/bin/ncu --clock-control none -k regex:moe \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
    --csv .carry/var/t/metrale bench --backend cuda --part layer --decode 1 --no-graphs --prefill 16384 --samples 1 \
    --warmup 0 > $O/ncu_ch$ch.csv 2>$O/ncu_ch$ch.err
  el "ncu chunk $ch rc=$?"
done
run c timeout $(tl 60) .carry/var/c/metrale audit --backend cuda > $O/audit_c.txt 2>&1
finish
