#!/bin/bash
# 2026-12-06 (forty-sixth session): a new slot list every decode step queued from the layer's
# host ring (4b92e8d) against the stream sync each new list took before, and the H200's layer rows
# with the FFN in chunks of 16384 tokens (1fb124a; measured only on an H100 so far).  Builds, made
# by scripts/device-prepare.sh at 78e2d1c or later:
#   n  main's head
#   t  n + sync_each_list.patch + ../h200-2026-12-05-ffn/chunk_timing.patch: with
#      METRALE_TIMING_SYNC_EACH_LIST set, upload_lists syncs the stream after each new list, as
#      e540141 and before did; METRALE_TIMING_FFN_CHUNK forces the FFN chunk (4096: before 1fb124a)
# The cuda suites on n (the new-list test also 50 times over), `bench --new-slots` with and
# without the sync (mixer and layer), n's table rows (mixer, core, layer), t's layer prefills at
# chunks 4096 and 16384.  Carry [".carry"] with .carry/var/{n,t}.
#   BUDGET=540 bash docs/bench/h200-2026-12-06-lists/call1.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run n timeout $(tl 150) .carry/var/n/metrale_conformance --jobs 8 > $O/conf_cuda_n.txt 2>&1
el "n cuda conformance rc=$? $(tail -1 $O/conf_cuda_n.txt)"
run n timeout $(tl 150) .carry/var/n/metrale_layer_tests --jobs 4 > $O/layer_cuda_n.txt 2>&1
el "n layer rc=$? $(tail -1 $O/layer_cuda_n.txt)"
run n env METRALE_TEST_REPEAT=50 timeout $(tl 120) .carry/var/n/metrale_layer_tests \
  --filter 'slots/new_list_every_step*' > $O/layer_cuda_n_newlist50.txt 2>&1
el "n new-list test x50 rc=$? $(tail -1 $O/layer_cuda_n_newlist50.txt)"
for round in 1 2; do
  for v in sync ring; do
    flag=METRALE_TIMING_NOTHING=1
    [ $v = sync ] && flag=METRALE_TIMING_SYNC_EACH_LIST=1
    run t env $flag timeout $(tl 60) .carry/var/t/metrale bench --backend cuda --new-slots --decode 1,8,64,256 \
      --prefill 4096 --samples 15 --json > $O/t_${v}_mixer_new_r$round.json 2>>$O/stderr.txt
    el "t $v mixer new slots round $round rc=$?"
    run t env $flag timeout $(tl 60) .carry/var/t/metrale bench --backend cuda --new-slots --part layer \
      --decode 1,8,64 --prefill 4096 --samples 15 --json > $O/t_${v}_layer_new_r$round.json 2>>$O/stderr.txt
    el "t $v layer new slots round $round rc=$?"
  done
  B n --samples 15 --json > $O/n_mixer_r$round.json 2>>$O/stderr.txt
  el "n mixer round $round rc=$?"
  B n --part layer --samples 15 --json > $O/n_layer_r$round.json 2>>$O/stderr.txt
  el "n layer round $round rc=$?"
  for ch in 4096 16384; do
    run t env METRALE_TIMING_FFN_CHUNK=$ch timeout $(tl 60) .carry/var/t/metrale bench --backend cuda --part layer \
      --decode 64 --prefill 4096,8192,16384 --samples 11 --json > $O/t_ch${ch}_r$round.json 2>>$O/stderr.txt
    el "t chunk $ch round $round rc=$?"
  done
done
B n --core --prefill 4096,16384,65536 --samples 15 --json > $O/n_core.json 2>>$O/stderr.txt
el "n core rc=$?"
run n timeout $(tl 60) .carry/var/n/metrale audit --backend cuda > $O/audit_n.txt 2>&1
finish
