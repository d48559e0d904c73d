#!/bin/bash
export LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/build-dev/bin
M=build-dev/bin/metrale
H=.carry/var/head/bin/metrale
HL=$PWD/.carry/lib:$PWD/.carry/var/head/bin
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
{ date -u
  METRALE_TEST_BACKEND=cuda build-dev/bin/metrale_conformance --jobs 8 --short-filename 2>&1 | grep -E "Synthesis|FAIL|Assert" | head
  METRALE_TEST_BACKEND=cuda build-dev/bin/metrale_layer_tests --jobs 4 --short-filename 2>&1 | tail -1
  for tool in memcheck synccheck; do
    METRALE_TEST_BACKEND=cuda $CS --tool $tool --print-limit 3 build-dev/bin/metrale_conformance --filter 'gemm/*ws64*' 2>&1 | grep -v "^=========     \(Host\|    \)" | tail -4
  done
} > $OUT/suites.txt 2>&1
cat $OUT/suites.txt
$M audit --backend cuda > $OUT/audit.txt 2>&1
for r in 1 2; do
  echo "== head round $r"; LD_LIBRARY_PATH=$HL $H bench --backend cuda --decode 5,8,16,32,64,128 --prefill 64 2>&1 | grep -E "^decode|^prefill|ceil"
  echo "== new round $r"; $M bench --backend cuda --decode 5,8,16,32,64,128 --prefill 64 2>&1 | grep -E "^decode|^prefill|ceil"
done > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
NCU=$(ls /usr/local/cuda/bin/ncu 2>/dev/null || which ncu)
for B in 8 64; do
  echo "== new decode $B"
  $NCU --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum -k regex:gemm -c 40 $M bench --backend cuda --decode $B --prefill 64 --samples 1 --warmup 0 --no-graphs 2>&1 | grep -E "^  [a-z]|gpu__time|dram__"
done > $OUT/ncu_raw.txt 2>&1
grep -A2 "ws64" $OUT/ncu_raw.txt | head -24
