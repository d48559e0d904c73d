#!/bin/bash
cd .carry/h
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
for r in 1 2; do for m in 0 1 2; do echo "== mode $m round $r"; ./kb2_$m; done; done > $OUT/kb2.txt 2>&1
for m in 0 2; do
/usr/local/cuda/bin/ncu --clock-control none -k regex:pair35 -s 310 -c 1 --metrics gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,launch__occupancy_limit_shared_mem,sm__cycles_active.avg ./kb2_$m > $OUT/ncu_$m.txt 2>&1
done
