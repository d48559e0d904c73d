#!/bin/bash
# Vulkan on NVIDIA's driver (2026-12-05, forty-second session): main (m) against v, the shaders
# whose state, record and conv loads are issued in batches (the fused decode 100 us a step, the
# chunked core ~15 ms and the conv 2.6 ms at 4096 tokens on an H100 before them,
# docs/bench/h100-2026-12-05-bisect/call3-vulkan), and w, v with the gemv to 8 rows on GPUs
# without matrix units.  Carry [".carry", ".gl"] with .carry/var/{m,v,w}.
# Prepare: scripts/device-prepare.sh m (at 9560ddd, before the shaders' change), then at e99bdca
# or later: scripts/device-prepare.sh v; scripts/device-prepare.sh w docs/bench/next/gemv8_simt.patch
#   BUDGET=400 bash docs/bench/next/call3/vk.sh     (ROUNDS=1 for one round of the benches)
cd "$(dirname "$0")/../../../.."
CALL=c3vk
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
vulkan_env
for round in $(seq ${ROUNDS:-2}); do
  for v in m v; do
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --samples 5 --warmup 1 --json > $O/${v}_mixer_$round.json 2>>$O/stderr.txt
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --core --prefill 4096,16384 --samples 5 --json > $O/${v}_core_$round.json 2>>$O/stderr.txt
  done
  # w: v with the gemv to 8 rows where the GPU has no matrix units (ops.c gemv_max_m)
  run w timeout $(tl 60) .carry/var/w/metrale bench --backend vulkan --decode 1,2,4,8,16,64 --prefill 64 --samples 5 --warmup 1 --json > $O/w_decode_$round.json 2>>$O/stderr.txt
  run v timeout $(tl 60) .carry/var/v/metrale bench --backend vulkan --decode 1,2,4,8,16,64 --prefill 64 --samples 5 --warmup 1 --json > $O/v_decode_$round.json 2>>$O/stderr.txt
done
el benches
for c in "--decode 1" "--prefill 4096"; do
  run v env METRALE_VULKAN_PROFILE=1 timeout $(tl 60) .carry/var/v/metrale bench --backend vulkan $c --samples 5 > "$O/v_profile_${c##* }.txt" 2>&1
done
el profiles
export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1 METRALE_TEST_REQUIRE_BACKEND=1
run w timeout $(tl 200) .carry/var/w/metrale_conformance --jobs 8 > $O/conf_vulkan_w.txt 2>&1
echo "w vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_w.txt)" >> $O/log.txt
run w timeout $(tl 200) .carry/var/w/metrale_layer_tests --jobs 8 > $O/layer_vulkan_w.txt 2>&1
echo "w vulkan layer rc=$? $(tail -1 $O/layer_vulkan_w.txt)" >> $O/log.txt
el suites
finish
