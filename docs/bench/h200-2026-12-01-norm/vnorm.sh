#!/bin/bash
export LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/build-dev/bin
M=build-dev/bin/metrale
H=.carry/var/head/bin/metrale
HL=$PWD/.carry/lib:$PWD/.carry/var/head/bin
{ date -u
  METRALE_TEST_BACKEND=cuda build-dev/bin/metrale_conformance --jobs 8 --short-filename 2>&1 | tail -1
  METRALE_TEST_BACKEND=cuda build-dev/bin/metrale_layer_tests --jobs 4 --short-filename 2>&1 | tail -1
} > $OUT/suites.txt 2>&1
cat $OUT/suites.txt
for r in 1 2; do
  echo "== head round $r"; LD_LIBRARY_PATH=$HL $H bench --backend cuda --part layer --decode 1,8,64 --prefill 64 2>&1 | grep -E "^decode|^prefill"
  echo "== new round $r"; $M bench --backend cuda --part layer --decode 1,8,64 --prefill 64 2>&1 | grep -E "^decode|^prefill"
done > $OUT/ab.txt 2>&1
cat $OUT/ab.txt
NCU=$(ls /usr/local/cuda/bin/ncu 2>/dev/null || which ncu)
$NCU --clock-control none --metrics gpu__time_duration.sum -k regex:rmsnorm -c 6 $M bench --backend cuda --part layer --decode 1 --prefill 16 --samples 1 --warmup 0 --no-graphs 2>&1 | grep -E "^  [a-z]|gpu__time" > $OUT/ncu.txt
LD_LIBRARY_PATH=$HL $NCU --clock-control none --metrics gpu__time_duration.sum -k regex:rmsnorm -c 6 $H bench --backend cuda --part layer --decode 1 --prefill 16 --samples 1 --warmup 0 --no-graphs 2>&1 | grep -E "^  [a-z]|gpu__time" > $OUT/ncu_head.txt
paste $OUT/ncu_head.txt $OUT/ncu.txt | head -12
