#!/bin/bash
# Vulkan on NVIDIA's driver (2026-12-05, forty-third session): m (main at 9f4b889) against p, the
# chunked core's phase 1 with its operands staged in shared memory a slice at a time (W and q,
# M, k; 16-byte loads spread over the block) instead of loaded by each thread where used: 110
# us a chunk, 7.1 ms at 4096 tokens on the H200 (docs/bench/h200-2026-12-05-libs/).
# Carry [".carry", ".gl"] with .carry/var/{m,p} (scripts/device-prepare.sh p with phase1_staged.patch applied).
#   BUDGET=300 bash docs/bench/h100-2026-12-05-libs/scripts/vkstage.sh
cd "$(dirname "$0")/../../../.."
CALL=c1vk
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
vulkan_env
for round in 1 2; do
  for v in m p; do
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --core --prefill 4096,16384 --samples 5 --json > $O/${v}_core_$round.json 2>>$O/stderr.txt
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --decode 1 --prefill 4096,16384 --samples 5 --warmup 1 --json > $O/${v}_mixer_$round.json 2>>$O/stderr.txt
  done
done
el benches
for v in m p; do
  run $v env METRALE_VULKAN_PROFILE=1 timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --decode 1 --prefill 4096 --samples 5 > $O/${v}_profile.txt 2>&1
done
el profiles
export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1 METRALE_TEST_REQUIRE_BACKEND=1
run p timeout $(tl 200) .carry/var/p/metrale_conformance --jobs 8 > $O/conf_vulkan_p.txt 2>&1
echo "p vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_p.txt)" >> $O/log.txt
run p timeout $(tl 200) .carry/var/p/metrale_layer_tests --jobs 8 > $O/layer_vulkan_p.txt 2>&1
echo "p vulkan layer rc=$? $(tail -1 $O/layer_vulkan_p.txt)" >> $O/log.txt
el suites
finish
