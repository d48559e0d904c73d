#!/bin/bash
# call 3: the decode gemvs without their early-start L2 prefetch (gemv_prologue's
# prefetch.global.L2 of the block's weight rows, gemv_no_prefetch.patch): `nf` = gemv_f32in only
# (in_proj at decode 1-2, the mixer graph's first kernel), `na` = every gemv; and `lb5` =
# moe_gate_up_silu_rows held to 48 registers (launch bounds for five blocks an SM, so that decode
# 1's 640 routed blocks are one wave; 84 bytes spilled; gate_up_five_blocks.patch); against `m`
# (7a9679b). Mixer and layer decode as graphs, ncu of the mixer's decode 1 gemvs and of the gate
# and up launches, moe conformance of lb5.
cd "$(dirname "$0")/../../../.."
CALL=c3
. scripts/device-call.sh
for v in m nf na; do
  run $v timeout 200 /usr/local/cuda/bin/ncu --clock-control none -k regex:gemv --metrics gpu__time_duration.sum,launch__grid_size --csv \
    .carry/var/$v/metrale bench --backend cuda --decode 1 --prefill 1 --samples 1 --warmup 0 --no-graphs > $O/ncu_$v.csv 2>&1
done
for v in m lb5; do
  run $v timeout 200 /usr/local/cuda/bin/ncu --clock-control none -k regex:moe_gate_up --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread --csv \
    .carry/var/$v/metrale bench --backend cuda --part layer --decode 1,8 --prefill 1 --samples 1 --warmup 0 --no-graphs > $O/ncu_gu_$v.csv 2>&1
done
el ncu
METRALE_TEST_BACKEND=cuda run lb5 timeout 200 .carry/var/lb5/metrale_conformance --jobs 8 --filter 'moe/*' > $O/conf_moe_lb5.txt 2>&1
echo "lb5 moe conformance rc=$? $(tail -1 $O/conf_moe_lb5.txt)" >> $O/log.txt
for r in 1 2 3; do
  for v in m nf na lb5; do
    [ $v != lb5 ] && B $v --decode 1,2 --prefill 1 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
    B $v --part layer --decode 1,2,4,8,16 --prefill 1 --samples 15 --json > $O/${v}_layer_$r.json 2>>$O/stderr.txt
  done
done
el rounds
finish
