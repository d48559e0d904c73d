#!/bin/bash
# Where a batch of short prompts spends the fp16 core: ncu (clocks free) of its two phases for
# 4096 tokens as 1 and as 128 sequences, build t2 without its timing variable (main's rule).
#   BUDGET=200 bash docs/bench/h200-2026-12-05-thr/call3.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call3}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
for S in 1 128; do
  run t2 timeout $(tl 90) /usr/local/cuda/bin/ncu --clock-control none -k regex:delta_rule_prefill \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    --csv .carry/var/t2/metrale bench --backend cuda --core --seqs $S --prefill 4096 --samples 1 --warmup 1 \
    > $O/ncu_s$S.csv 2>$O/ncu_s$S.err
  el "ncu S=$S rc=$?"
done
finish
