#!/bin/bash
# call 8: why the staged epilogue (stg2 = call6/staged.patch) is slower than head (2489eca):
# ncu sections of gemm_f16_ws_cols3 at a 4096-token mixer prefill (one launch each)
cd "$(dirname "$0")/../../../.."
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
O=$OUT/c8; mkdir -p $O; date -u > $O/checks.txt
for v in head stg2; do
run $v timeout 200 /usr/local/cuda/bin/ncu --clock-control none -k regex:cols3 -c 1 --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats \
  .carry/var/$v/metrale bench --backend cuda --part mixer --decode 1 --prefill 4096 --samples 1 --warmup 0 > $O/ncu_sections_$v.txt 2>&1
done
for v in head stg2; do echo "== $v"; grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Issued Ipc|Warp Cycles Per Issued|Stall|No Eligible|Active Warps Per Scheduler|Eligible Warps|Mem Busy|Max Bandwidth|Mem Pipes Busy|Shared" $O/ncu_sections_$v.txt | head -40; done
tar czf $OUT/c8.tgz -C $OUT c8 && rm -rf $O
