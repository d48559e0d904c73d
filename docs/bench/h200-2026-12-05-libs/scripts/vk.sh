#!/bin/bash
# Vulkan on NVIDIA's driver (2026-12-05, forty-second session): o (before) against main (m), the shaders
# whose state, record and conv loads are issued in batches (the fused decode 100 us a step, the
# chunked core ~15 ms and the conv 2.6 ms at 4096 tokens on an H100 before them,
# docs/bench/h100-2026-12-05-bisect/call3-vulkan), and w, m with the gemv to 8 rows on GPUs
# without matrix units.  Carry [".carry", ".gl"] with .carry/var/{o,m,w}.
# Prepare: scripts/device-prepare.sh o in a worktree at 9560ddd (before the shaders' change), its
# .carry/var/o moved here; then at main's head: scripts/device-prepare.sh m;
# scripts/device-prepare.sh w the gemv8 patch (landed as 427913f)
#   BUDGET=400 bash docs/bench/h200-2026-12-05-libs/scripts/vk.sh     (ROUNDS=1 for one round of the benches)
cd "$(dirname "$0")/../../../.."
CALL=c3vk
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
vulkan_env
for round in $(seq ${ROUNDS:-2}); do
  for v in o m; do
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --samples 5 --warmup 1 --json > $O/${v}_mixer_$round.json 2>>$O/stderr.txt
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --core --prefill 4096,16384 --samples 5 --json > $O/${v}_core_$round.json 2>>$O/stderr.txt
  done
  # w: m with the gemv to 8 rows where the GPU has no matrix units (ops.c gemv_max_m)
  run w timeout $(tl 60) .carry/var/w/metrale bench --backend vulkan --decode 1,2,4,8,16,64 --prefill 64 --samples 5 --warmup 1 --json > $O/w_decode_$round.json 2>>$O/stderr.txt
  run m timeout $(tl 60) .carry/var/m/metrale bench --backend vulkan --decode 1,2,4,8,16,64 --prefill 64 --samples 5 --warmup 1 --json > $O/m_decode_$round.json 2>>$O/stderr.txt
done
el benches
for c in "--decode 1" "--prefill 4096"; do
  run m env METRALE_VULKAN_PROFILE=1 timeout $(tl 60) .carry/var/m/metrale bench --backend vulkan $c --samples 5 > "$O/m_profile_${c##* }.txt" 2>&1
done
el profiles
export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1 METRALE_TEST_REQUIRE_BACKEND=1
for t in vulkan_device vulkan_memory vulkan_shapes; do
  run m timeout $(tl 60) .carry/var/m/$t > $O/${t}_m.txt 2>&1
  echo "m $t rc=$? $(tail -1 $O/${t}_m.txt)" >> $O/log.txt
done
for v in m w; do
  run $v timeout $(tl 200) .carry/var/$v/metrale_conformance --jobs 8 > $O/conf_vulkan_$v.txt 2>&1
  echo "$v vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_$v.txt)" >> $O/log.txt
  run $v timeout $(tl 200) .carry/var/$v/metrale_layer_tests --jobs 8 > $O/layer_vulkan_$v.txt 2>&1
  echo "$v vulkan layer rc=$? $(tail -1 $O/layer_vulkan_$v.txt)" >> $O/log.txt
done
el suites
finish
