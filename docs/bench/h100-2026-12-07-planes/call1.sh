#!/bin/bash
# Prepared 2026-12-06 (fifty-third session), not yet run.  Three builds: fn (main), qk (branch qkh: the conv writes q and k in half into the whole-head core's planes,
# phase 0 only solves: conv1d_prefill_l2norm_qkh + delta_rule_prefill_chunked_wh_prep_qkh) and q2
# (qkh + p2zero.patch).  q2's cuda suites first (the new tests among them), then the core at the
# bench's, slow and FlashQLA's gates and the mixer's prefill rows, two rounds; ncu of the mixer's
# conv and core kernels at 16384 tokens (fn, q2).  README.md here.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-next}
BUDGET=${BUDGET:-330}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run q2 timeout $(tl 100) .carry/var/q2/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "q2 cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run q2 timeout $(tl 60) .carry/var/q2/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "q2 cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
round() {
  for v in fn q2 qk; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$1.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 16384 --samples 15 --json > $O/${v}_slow_$1.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/${v}_peer_$1.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$1.json 2>>$O/stderr.txt
    el "$v round $1 rc=$?"
  done
}
round 1
for v in q2 fn; do
  run $v timeout $(tl 40) /usr/local/cuda/bin/ncu --clock-control none -k regex:"conv1d|delta_rule_prefill" \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
    --csv .carry/var/$v/metrale bench --backend cuda --part mixer --prefill 16384 --samples 1 --warmup 1 \
    > $O/ncu_mixer_$v.csv 2>$O/ncu_mixer_$v.err
  el "ncu $v rc=$?"
done
[ $(tl 100) -ge 100 ] && round 2
run q2 timeout $(tl 30) .carry/var/q2/metrale audit --backend cuda > $O/audit_q2.txt 2>&1
finish
