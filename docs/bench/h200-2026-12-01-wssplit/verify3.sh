#!/bin/bash
export LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/build-dev/bin
M=build-dev/bin/metrale
H=.carry/var/head/bin/metrale
HL=$PWD/.carry/lib:$PWD/.carry/var/head/bin
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  METRALE_TEST_BACKEND=cuda build-dev/bin/metrale_conformance --jobs 8 --short-filename 2>&1 | tail -1
  METRALE_TEST_BACKEND=cuda build-dev/bin/metrale_layer_tests --jobs 4 --short-filename 2>&1 | tail -1
  for tool in memcheck synccheck racecheck; do
    echo "== $tool gemm/*ws_splitk*"
    METRALE_TEST_BACKEND=cuda $CS --tool $tool --print-limit 3 build-dev/bin/metrale_conformance --filter 'gemm/*ws_splitk*' 2>&1 | grep -v "^=========     \(Host\|    \)" | tail -6
  done
} > $OUT/suites.txt 2>&1
cat $OUT/suites.txt
$M audit --backend cuda > $OUT/audit.txt 2>&1
for r in 1 2; do
  echo "== head round $r"; LD_LIBRARY_PATH=$HL $H bench --backend cuda --decode 1,8,64,128,192,256 --prefill 64 2>&1 | grep -E "^decode|^prefill|ceil"
  echo "== new round $r"; $M bench --backend cuda --decode 1,8,64,128,192,256 --prefill 64 2>&1 | grep -E "^decode|^prefill|ceil"
done > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
