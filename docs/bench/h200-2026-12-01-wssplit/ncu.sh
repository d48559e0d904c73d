#!/bin/bash
export LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/build-dev/bin
M=build-dev/bin/metrale
NCU=$(ls /usr/local/cuda/bin/ncu 2>/dev/null || which ncu)
for S in 0 2 4 8; do
  for B in ${BATCHES:-8 64 128 192 256}; do
    echo "== split $S decode $B"
    METRALE_EXP_WS_SPLIT=$S $NCU --clock-control none --section LaunchStats --metrics gpu__time_duration.sum -k regex:gemm -c 40 $M bench --backend cuda --decode $B --prefill 64 --samples 1 --warmup 0 --no-graphs 2>&1 | grep -E "^  [a-z]|gpu__time|Max Active Clusters"
  done
done > $OUT/ncu_raw.txt
echo done
