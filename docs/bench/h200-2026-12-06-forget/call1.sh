#!/bin/bash
# Prepared 2026-12-06 (fifty-first and fifty-second sessions), not yet run: builds mn (main),
# w0 (main + w0.patch: segment 0 weighted), o6 (main + o6.patch: wh_prep at six blocks an SM) and
# sk (branch skip: w0 + F_j from the chunk where the state forgets its start, M_j zero there);
# README.md here.  The whole-head tests on w0, o6 and sk; the core of one sequence on w0 with
# METRALE_WH_SEG0 = 16 (equal segments: main's boundaries) and the ops' own (22), on sk at 8, 16
# and 22, at the bench's gates and at slow ones (where sk skips nothing); sa (branch skip's head:
# w0 = 1 taken where every head forgets each segment's start) at both gates, and at 2048 and 4096
# tokens in 5 segments (METRALE_WH_SEGMENTS=5; the ops take the fp16 kernel there); mn beside; o6
# against mn as one and as 8 sequences; the mixer at 16384 tokens on w0 and sk; on an H200 the
# issue-6 table's mixer and layer rows on mn; the cuda suites on sa (which holds sk and w0).
# Carry [".carry"].  Move what comes back to docs/bench/<gpu>-<date>-<topic>/.
cd "$(dirname "$0")/../../.."
CALL=${CALL:-next}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
for v in sa sk w0 o6; do
  run $v timeout $(tl 40) .carry/var/$v/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh_$v.txt 2>&1
  el "$v conformance wh* rc=$? $(tail -1 $O/conf_wh_$v.txt)"
done
run sk timeout $(tl 30) .carry/var/sk/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "sk layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
for r in 1 2 3; do
  for w in 16 auto; do
    if [ $w = auto ]; then unset METRALE_WH_SEG0; else export METRALE_WH_SEG0=$w; fi
    B w0 --core --prefill 8192,16384,65536 --samples 15 --json > $O/w0_core_w${w}_$r.json 2>>$O/stderr.txt
    el "w0 core w0=$w round $r rc=$?"
  done
  for w in 1 8 16 auto; do
    if [ $w = auto ]; then unset METRALE_WH_SEG0; else export METRALE_WH_SEG0=$w; fi
    B sk --core --prefill 8192,16384,65536 --samples 15 --json > $O/sk_core_w${w}_$r.json 2>>$O/stderr.txt
    B sk --core --gates slow --prefill 16384,65536 --samples 15 --json > $O/sk_slow_w${w}_$r.json 2>>$O/stderr.txt
    el "sk core w0=$w round $r rc=$?"
  done
  unset METRALE_WH_SEG0
  B sa --core --prefill 4096,8192,16384,65536 --samples 15 --json > $O/sa_core_$r.json 2>>$O/stderr.txt
  B sa --core --gates slow --prefill 16384,65536 --samples 15 --json > $O/sa_slow_$r.json 2>>$O/stderr.txt
  METRALE_WH_SEGMENTS=5 B sa --core --prefill 2048,4096 --samples 15 --json > $O/sa_core5_$r.json 2>>$O/stderr.txt
  METRALE_WH_SEGMENTS=5 B sa --core --gates slow --prefill 2048,4096 --samples 15 --json > $O/sa_slow5_$r.json 2>>$O/stderr.txt
  el "sa core round $r rc=$?"
  for v in mn o6; do
    B $v --core --prefill 8192,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/${v}_core8_$r.json 2>>$O/stderr.txt
    el "$v core round $r rc=$?"
  done
  B mn --core --gates slow --prefill 16384,65536 --samples 15 --json > $O/mn_slow_$r.json 2>>$O/stderr.txt
done
for v in mn w0 sk sa; do
  B $v --part mixer --decode 1 --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer.json 2>>$O/stderr.txt
  el "$v mixer rc=$?"
done
# on an H200, the issue-6 table's rows on main (mixer, layer; the core's are mn's rounds above)
if grep -q H200 $O/gpu.txt; then
  run mn .carry/var/mn/metrale audit --backend cuda > $O/audit.txt 2>&1
  for r in 1 2 3; do
    B mn --samples 15 --json > $O/mn_mixer_$r.json 2>>$O/stderr.txt
    el "mixer round $r rc=$?"
    B mn --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/mn_layer_$r.json 2>>$O/stderr.txt
    el "layer round $r rc=$?"
  done
fi
export METRALE_TEST_BACKEND=cuda
run sa timeout $(tl 100) .carry/var/sa/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "sa cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run sa timeout $(tl 60) .carry/var/sa/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "sa cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
finish
