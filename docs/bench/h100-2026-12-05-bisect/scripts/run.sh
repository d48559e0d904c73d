#!/bin/bash
# The next device call (docs/bench/h100-2026-12-05-bisect/README.md), prepared on 2026-12-05 without a device,
# in parts that each end inside one `run`'s 10 minutes (BUDGET seconds, 560 unless set):
#   bash docs/bench/h100-2026-12-05-bisect/scripts/run.sh cuda      # CUDA suites on main, cuda bench
#   bash docs/bench/h100-2026-12-05-bisect/scripts/run.sh vkcheck   # does the ICD load: the audit, vulkan_device
#   bash docs/bench/h100-2026-12-05-bisect/scripts/run.sh vksuites  # Vulkan device, memory, shapes, conformance
#   bash docs/bench/h100-2026-12-05-bisect/scripts/run.sh vk        # Vulkan benches, profiles, layer suite
# Before them, on the development machine:
#   rm -rf .carry/var                                                       # old variants
#   scripts/device-prepare.sh m                                              # main's head
#   scripts/device-prepare.sh --vulkan-loader
# then run each with carry [".carry", ".gl"]. Then move this folder and what comes back to
# docs/bench/h200-<date>-<topic>/.
cd "$(dirname "$0")/../../../.."
PART=${1:?cuda, vkcheck, vksuites or vk}
CALL=c1$PART
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1

if [ "$PART" = cuda ]; then
  # 1. CUDA on main: conformance (with gdn::delta_rule_prefill_chunked_long) and the layer suite
  export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
  run m timeout $(tl 150) .carry/var/m/metrale_conformance --jobs 8 > $O/conf_cuda_m.txt 2>&1
  echo "m cuda conformance rc=$? $(tail -1 $O/conf_cuda_m.txt)" >> $O/log.txt
  run m env METRALE_LAUNCH_LOG=$O/launches_layer_m.txt timeout $(tl 120) .carry/var/m/metrale_layer_tests --jobs 4 > $O/layer_cuda_m.txt 2>&1
  echo "m cuda layer rc=$? $(tail -1 $O/layer_cuda_m.txt)" >> $O/log.txt
  run m .carry/var/m/metrale audit --backend cuda > $O/audit_cuda_m.txt 2>&1
  python3 scripts/launch-coverage.py $O/audit_cuda_m.txt $O/launches_layer_m.txt cuda >> $O/log.txt 2>&1
  el cuda suites

  run m timeout $(tl 90) .carry/var/m/metrale bench --backend cuda --samples 15 --json > $O/cuda_mixer.json 2>>$O/stderr.txt
  el cuda mixer
elif [ "$PART" = vkcheck ]; then
  # does NVIDIA's ICD load (the audit), and the device test
  vulkan_env
  run m .carry/var/m/metrale audit --backend vulkan > $O/audit_vulkan.txt 2>&1
  echo "m vulkan audit rc=$? $(head -1 $O/audit_vulkan.txt)" >> $O/log.txt
  # the loader's own account of the ICD (the failure of 2026-12-05 is a known one in containers
  # without the driver's graphics libraries: nvidia-container-toolkit issue 191), and what of
  # NVIDIA's user-space driver the machine has
  VK_LOADER_DEBUG=error,warn,driver run m .carry/var/m/metrale audit --backend vulkan > $O/vulkan_loader_debug.txt 2>&1
  ls -l /usr/lib/x86_64-linux-gnu/ | grep -i "nvidia\|GLX\|EGL\|GLdispatch" > $O/vulkan_nvidia_libs.txt 2>&1
  echo "NVIDIA_DRIVER_CAPABILITIES=${NVIDIA_DRIVER_CAPABILITIES:-unset}" >> $O/vulkan_nvidia_libs.txt
  METRALE_TEST_REQUIRE_BACKEND=1 run m timeout $(tl 60) .carry/var/m/vulkan_device > $O/vulkan_device.txt 2>&1
  echo "m vulkan_device rc=$? $(tail -1 $O/vulkan_device.txt)" >> $O/log.txt
elif [ "$PART" = vksuites ]; then
  # 3. the Vulkan suites with validation (the layer suite is in part vk)
  vulkan_env
  run m .carry/var/m/metrale audit --backend vulkan > $O/audit_vulkan.txt 2>&1
  export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1 METRALE_TEST_REQUIRE_BACKEND=1
  for t in vulkan_device vulkan_memory vulkan_shapes; do
    run m timeout $(tl 90) .carry/var/m/$t > $O/$t.txt 2>&1
    echo "m $t rc=$? $(tail -1 $O/$t.txt)" >> $O/log.txt
  done
  run m timeout $(tl 300) .carry/var/m/metrale_conformance --jobs 8 > $O/conf_vulkan_m.txt 2>&1
  echo "m vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_m.txt)" >> $O/log.txt
  el vulkan suites
else
  vulkan_env
  # the benches first: they are what this part is for
  run m timeout $(tl 150) .carry/var/m/metrale bench --backend vulkan --samples 5 --warmup 1 --json > $O/vulkan_mixer.json 2>>$O/stderr.txt
  run m timeout $(tl 100) .carry/var/m/metrale bench --backend vulkan --core --prefill 4096,16384 --samples 5 --json > $O/vulkan_core.json 2>>$O/stderr.txt
  el vulkan benches
  # the Vulkan step split by kernel (METRALE_VULKAN_PROFILE: a table on stderr at exit; each run
  # also holds the bench's probes: 8192^3 gemm_bf16_t128 launches and a copy)
  run m env METRALE_VULKAN_PROFILE=1 timeout $(tl 60) .carry/var/m/metrale bench --backend vulkan --decode 1 --samples 5 > $O/vulkan_profile_decode1.txt 2>&1
  run m env METRALE_VULKAN_PROFILE=1 timeout $(tl 60) .carry/var/m/metrale bench --backend vulkan --prefill 4096 --samples 5 > $O/vulkan_profile_prefill4096.txt 2>&1
  el vulkan profiles
  export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1 METRALE_TEST_REQUIRE_BACKEND=1
  run m timeout $(tl 500) .carry/var/m/metrale_layer_tests --jobs 8 > $O/layer_vulkan_m.txt 2>&1
  echo "m vulkan layer rc=$? $(tail -1 $O/layer_vulkan_m.txt)" >> $O/log.txt
  el vulkan layer
fi
finish
