#!/bin/bash
# call-next.sh's first measurements alone, for a call with under two minutes of device time: builds mn, cr4,
# wd, w64, w160 at 397B's and the bench's shapes (one round), then ncu kernel times of mn, w160 and w64 at
# 397B decode 1, 8, 64.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-min}
BUDGET=${BUDGET:-110}
. scripts/device-call.sh
S397=docs/shapes/qwen3_5_397b_a17b.json
for v in mn w160 w64 wd cr4; do
  B $v --config $S397 --decode 1,2,3,4,8,64 --prefill 64 --samples 15 --json > "$O/${v}_397_1.json" 2>>"$O/stderr.txt"
  el "$v 397 rc=$?"
done
for v in mn w160; do
  B $v --decode 1,4,8,64 --prefill 64 --samples 15 --json > "$O/${v}_a3b_1.json" 2>>"$O/stderr.txt"
  el "$v a3b rc=$?"
done
for v in mn w160 w64; do
  [ "$(tl 20)" -lt 20 ] && break
  run $v timeout "$(tl 30)" /usr/local/cuda/bin/ncu --clock-control none -k 'regex:gemm|gemv' \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv .carry/var/$v/metrale bench --backend cuda --config $S397 \
    --decode 1,8,64 --prefill 64 --samples 1 --warmup 0 --no-graphs > "$O/ncu_$v.csv" 2>&1
  el "$v ncu rc=$?"
done
finish
