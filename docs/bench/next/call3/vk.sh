#!/bin/bash
# Vulkan on NVIDIA's driver (2026-12-05, forty-second session): main (m) against v, the shaders
# whose state, record and conv loads are issued in batches (the fused decode 100 us a step, the
# chunked core ~15 ms and the conv 2.6 ms at 4096 tokens on an H100 before them,
# docs/bench/h100-2026-12-05-bisect/call3-vulkan).  Carry [".carry", ".gl"] with .carry/var/{m,v}.
#   BUDGET=400 bash docs/bench/next/call3/vk.sh
cd "$(dirname "$0")/../../../.."
CALL=c3vk
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -e $icd ] && export VK_DRIVER_FILES=$icd
[ -e $egl ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
for round in 1 2; do
  for v in m v; do
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --samples 5 --warmup 1 --json > $O/${v}_mixer_$round.json 2>>$O/stderr.txt
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --core --prefill 4096,16384 --samples 5 --json > $O/${v}_core_$round.json 2>>$O/stderr.txt
  done
done
el benches
for c in "--decode 1" "--prefill 4096"; do
  run v env METRALE_VULKAN_PROFILE=1 timeout $(tl 60) .carry/var/v/metrale bench --backend vulkan $c --samples 5 > "$O/v_profile_${c##* }.txt" 2>&1
done
el profiles
export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1 METRALE_TEST_REQUIRE_BACKEND=1
run v timeout $(tl 200) .carry/var/v/metrale_conformance --jobs 8 > $O/conf_vulkan_v.txt 2>&1
echo "v vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_v.txt)" >> $O/log.txt
run v timeout $(tl 200) .carry/var/v/metrale_layer_tests --jobs 8 > $O/layer_vulkan_v.txt 2>&1
echo "v vulkan layer rc=$? $(tail -1 $O/layer_vulkan_v.txt)" >> $O/log.txt
el suites
finish
