#!/bin/bash
# Why main's layer raced on 2026-12-05 (docs/bench/h200-2026-12-05-pdl/README.md): with
# add_rmsnorm launched as usual behind out_proj, layer_cuda failed 9 of 25; with it an
# early-start row that waits (e59e3f3, now main) 25 of 25.  Variants, from main's head:
#   m  main
#   u  usual_launch.patch: add_rmsnorm launched as usual again (the failing form)
#   a  u + rmsnorm_no_trigger.patch: the input norms no longer let the next launch start early
#   b  u + add_rmsnorm_no_trigger.patch: add_rmsnorm no longer lets the next launch start early
#   c  u + add_rmsnorm_ldcg.patch: add_rmsnorm reads its inputs past L1 (ld.global.cg): whether a
#      stale L1 line explains it
#   e  u run with METRALE_NO_EARLY_START=1: no programmatic launch at all (no build of its own)
# Prepare (development machine):
#   rm -rf .carry/var; P=docs/bench/h100-2026-12-05-bisect/scripts
#   scripts/device-prepare.sh m
#   CUBINS=1 scripts/device-prepare.sh u $P/usual_launch.patch
#   scripts/device-prepare.sh a $P/usual_launch.patch $P/rmsnorm_no_trigger.patch
#   scripts/device-prepare.sh b $P/usual_launch.patch $P/add_rmsnorm_no_trigger.patch
#   scripts/device-prepare.sh c $P/usual_launch.patch $P/add_rmsnorm_ldcg.patch
# (one after another: they share the worktree list).  Two parts, each inside one `run`'s 10
# minutes (every timeout cut to BUDGET s, 560 unless set), carry [".carry"]:
#   bash docs/bench/h100-2026-12-05-bisect/scripts/bisect.sh suites   # the layer suite of every variant, the queued
#                                                 # steps 100 times, the SASS check
#   bash docs/bench/h100-2026-12-05-bisect/scripts/bisect.sh rest     # the layer bench of every variant, u alone and
#                                                 # under initcheck and memcheck
# Reading it: if u passes every round and its queued steps too, the race is rare and this says
# little; if u fails and b passes, the kernel after add_rmsnorm does not wait for it; if c passes,
# a stale L1 line of the step before is read; if e fails too, it is not the early start at all.
cd "$(dirname "$0")/../../../.."
PART=${1:?suites or rest}
CALL=c2$PART
. scripts/device-call.sh
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
# V VARIANT CMD...: CMD with VARIANT's build in .carry/var; e is u's with METRALE_NO_EARLY_START=1
V() {
  local v=$1
  shift
  if [ "$v" = e ]; then run u env METRALE_NO_EARLY_START=1 "$@"; else run "$v" "$@"; fi
}
dir() { [ "$1" = e ] && echo .carry/var/u || echo ".carry/var/$1"; }

if [ "$PART" = suites ]; then
  # the early-start contract in the machine code first (seconds): u's kernels
  for f in .carry/var/u/cubin/*.sm_90a.cubin; do # cuobjdump takes one file
    /usr/local/cuda/bin/cuobjdump -sass "$f"
  done > $O/sass_u.txt 2>>$O/stderr.txt
  python3 scripts/sass-pdl-check.py $O/sass_u.txt .carry/var/u/cubin/kernels.def > $O/sass_check_u.txt 2>&1
  echo "sass check rc=$? (0 clean, 1 suspect, 2 unread)" >> $O/log.txt
  grep -E "SUSPECT|^(add_rmsnorm|rmsnorm|gemv_bf16|moe_gate_up_silu_rows) " $O/sass_check_u.txt >> $O/log.txt
  # the layer suite (with the heads of 128 and the bench's shape since 2026-12-05)
  for round in 1 2; do
    vs="m u a b c e"; [ $round = 2 ] && vs="m u"
    for v in $vs; do
      V $v env METRALE_LAUNCH_LOG=$O/launches_${v}_$round.txt timeout $(tl 120) $(dir $v)/metrale_layer_tests --jobs 4 > $O/layer_${v}_$round.txt 2>&1
      echo "$v round $round rc=$? $(tail -1 $O/layer_${v}_$round.txt)" >> $O/log.txt
    done
  done
  el suites
  # which of main's cuda kernels the layer suite reached (scripts/launch-coverage.py)
  run m .carry/var/m/metrale audit --backend cuda > $O/audit_cuda_m.txt 2>&1
  python3 scripts/launch-coverage.py $O/audit_cuda_m.txt $O/launches_m_1.txt cuda >> $O/log.txt 2>&1
  # the queued and repeated decode steps (tests/layer/test_slots.c), 100 runs of each form: a race
  # that the suite's single runs may miss
  for v in m u e; do
    V $v env METRALE_TEST_REPEAT=100 timeout $(tl 90) $(dir $v)/metrale_layer_tests --filter 'slots/queued*' > $O/queued_$v.txt 2>&1
    echo "$v queued x100 rc=$? $(tail -1 $O/queued_$v.txt)" >> $O/log.txt
  done
  el queued
else
  # what each costs (the bench's layer decode, MoE a3b shape, graphs)
  for v in m u a b c e; do
    V $v timeout $(tl 45) $(dir $v)/metrale bench --backend cuda --part layer --decode 1,2,4,8,16 --prefill 4096 --samples 15 --json > $O/${v}_layer.json 2>>$O/stderr.txt
  done
  el benches
  # u alone on the GPU (no other test process beside it), and its dense fixture under initcheck
  # (a read of device memory no one wrote) and memcheck
  run u timeout $(tl 120) .carry/var/u/metrale_layer_tests --jobs 1 > $O/layer_u_jobs1.txt 2>&1
  echo "u jobs 1 rc=$? $(tail -1 $O/layer_u_jobs1.txt)" >> $O/log.txt
  for t in initcheck memcheck; do
    run u timeout $(tl 70) /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/u/metrale_layer_tests --jobs 1 --filter 'fixtures/dense_r1_layer' > $O/$t.txt 2>&1
    echo "u $t dense_r1 rc=$? $(tail -1 $O/$t.txt)" >> $O/log.txt
  done
  el sanitizers
fi
finish
