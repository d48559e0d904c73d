#!/bin/bash
# Vulkan on NVIDIA's driver (2026-12-05, forty-third session): the pipelines' statistics
# (VK_KHR_pipeline_executable_properties, printed under METRALE_VULKAN_PROFILE=1 since 488354b)
# of every kernel a decode step and a 4096-token prefill run: whether the chunked core's phase 1
# (110 us a chunk, 2 % of the f32 rate) keeps its arrays in local memory, and its registers.
# Carry [".carry", ".gl"] with .carry/var/s (scripts/device-prepare.sh s at 488354b or later).
#   BUDGET=200 bash docs/bench/h100-2026-12-05-libs/scripts/stats.sh
cd "$(dirname "$0")/../../../.."
CALL=c1stats
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
vulkan_env
run s env METRALE_VULKAN_VALIDATION=1 METRALE_TEST_REQUIRE_BACKEND=1 timeout $(tl 60) .carry/var/s/vulkan_device --verbose > $O/vulkan_device_s.txt 2>&1
echo "s vulkan_device rc=$? $(tail -1 $O/vulkan_device_s.txt)" >> $O/log.txt
run s env METRALE_VULKAN_PROFILE=1 timeout $(tl 90) .carry/var/s/metrale bench --backend vulkan --decode 1,8 --prefill 4096 --samples 3 > $O/s_profile.txt 2>&1
echo "s profile rc=$?" >> $O/log.txt
grep -A 40 "pipeline statistics" $O/s_profile.txt >> $O/log.txt
el done
finish
