#!/bin/bash
# ws split-K experiment: conformance of the gemm module, A/B of decode rows, ncu of the GEMMs
export LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/build-dev/bin
M=build-dev/bin/metrale
H=.carry/var/head/bin/metrale
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv; date -u; } > $OUT/gpu_date.txt
METRALE_TEST_BACKEND=cuda build-dev/bin/metrale_conformance --jobs 8 --short-filename --filter 'gemm/*' > $OUT/conf_gemm.txt 2>&1
tail -3 $OUT/conf_gemm.txt
for r in 1 2; do
  echo "== head round $r"; LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/head/bin $H bench --backend cuda --decode 8,64,128,192,256 --prefill 64 --samples 15 2>&1 | grep -E "decode|prefill|ceil"
  for S in 2 4 8; do
    echo "== split $S round $r"; METRALE_EXP_WS_SPLIT=$S $M bench --backend cuda --decode 8,64,128,192,256 --prefill 64 --samples 15 2>&1 | grep -E "decode|prefill"
  done
done > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
NCU=$(ls /usr/local/cuda/bin/ncu 2>/dev/null || which ncu)
for S in 0 2 4 8; do
  for B in 64 128 256; do
    echo "== split $S decode $B"
    METRALE_EXP_WS_SPLIT=$S $NCU --clock-control none --section LaunchStats --metrics gpu__time_duration.sum -k regex:gemm -c 6 $M bench --backend cuda --decode $B --prefill 64 --samples 1 --warmup 0 --no-graphs 2>&1 | grep -E "^  [a-z]|gpu__time|Max Active Clusters|Cluster Size"
  done
done > $OUT/ncu.txt 2>&1
cat $OUT/ncu.txt | head -150
