#!/bin/bash
# Prepared 2026-12-07 (fifty-fourth session).  Builds: mn (main at 36f9e43: the planes pair and
# p2zero, landed after docs/bench/h100-2026-12-07-planes), st (branch stage: the qkh conv stages
# each whole group of 8 plane rows in shared memory and stores it as 2 KiB) and s2 (st at two
# blocks an SM: docs/bench/next/two_blocks.patch) and p6 (st with phase 0 of the planes at six blocks
# an SM: prep_six_blocks.patch).  st's and s2's conv tests and the layer's prefill
# paths; the mixer's prefill rows, two rounds; ncu of the conv (mn, st) and of phase 0 (mn) with
# their stall and occupancy sections; then main's rows of the issue-6 table.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-next}
BUDGET=${BUDGET:-500}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run p6 timeout $(tl 40) .carry/var/p6/metrale_conformance --jobs 8 --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh_p6.txt 2>&1
el "p6 whole-head conformance rc=$? $(tail -1 $O/conf_wh_p6.txt)"
for v in st s2; do
  run $v timeout $(tl 40) .carry/var/$v/metrale_conformance --jobs 8 --filter 'conv/*' > $O/conf_conv_$v.txt 2>&1
  el "$v conv conformance rc=$? $(tail -1 $O/conf_conv_$v.txt)"
  run $v timeout $(tl 40) .carry/var/$v/metrale_layer_tests --jobs 8 --filter 'modes/*' > $O/layer_$v.txt 2>&1
  el "$v layer prefill rc=$? $(tail -1 $O/layer_$v.txt)"
done
unset METRALE_TEST_BACKEND
round() {
  for v in mn st s2 p6; do
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$1.json 2>>$O/stderr.txt
    el "$v mixer round $1 rc=$?"
  done
  for v in mn p6; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$1.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 16384 --samples 15 --json > $O/${v}_slow_$1.json 2>>$O/stderr.txt
    el "$v core round $1 rc=$?"
  done
}
round 1
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,smsp__inst_executed.sum
M=$M,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
M=$M,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum
ncu_of() { # build, kernel regex, file
  run $1 timeout $(tl 60) /usr/local/cuda/bin/ncu --clock-control none -k regex:"$2" -c 1 --metrics $M \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --csv \
    .carry/var/$1/metrale bench --backend cuda --part mixer --prefill 16384 --samples 1 --warmup 0 > $O/$3.csv 2>$O/$3.err
  el "ncu $3 rc=$?"
}
ncu_of mn conv1d_prefill_l2norm ncu_conv_mn
ncu_of st conv1d_prefill_l2norm ncu_conv_st
ncu_of mn wh_prep ncu_prep_mn
ncu_of p6 wh_prep ncu_prep_p6
round 2
# main's rows of the issue-6 table
B mn --samples 15 --json > $O/mn_table_mixer.json 2>>$O/stderr.txt
B mn --core --prefill 4096,16384,65536 --samples 15 --json > $O/mn_table_core.json 2>>$O/stderr.txt
B mn --core --gates slow --prefill 4096,16384,65536 --samples 15 --json > $O/mn_table_slow.json 2>>$O/stderr.txt
B mn --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/mn_table_peer.json 2>>$O/stderr.txt
el "mn table core and mixer rc=$?"
B mn --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/mn_table_layer.json 2>>$O/stderr.txt
el "mn table layer rc=$?"
run mn timeout $(tl 30) .carry/var/mn/metrale audit --backend cuda > $O/audit_mn.txt 2>&1
finish
