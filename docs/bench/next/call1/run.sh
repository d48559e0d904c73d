#!/bin/bash
# The next device call (docs/bench/next/README.md), prepared on 2026-12-05 without a device.
# Before it, on the development machine:
#   rm -rf .carry/var                                                       # old variants
#   scripts/device-prepare.sh m                                              # main's head
#   scripts/device-prepare.sh r docs/bench/next/add_rmsnorm_early_start.patch
#   scripts/device-prepare.sh --vulkan-loader
# then run with carry [".carry", ".gl"]:  bash docs/bench/next/call1/run.sh
# (~15-20 min of device time: the Vulkan layer suite takes minutes on its own).  Then move
# this folder and what comes back to docs/bench/h200-<date>-<topic>/.
cd "$(dirname "$0")/../../../.."
CALL=c1
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1

# 1. CUDA on main: conformance (with gdn::delta_rule_prefill_chunked_long) and the layer suite
export METRALE_TEST_BACKEND=cuda
run m timeout 400 .carry/var/m/metrale_conformance --jobs 8 > $O/conf_cuda_m.txt 2>&1
echo "m cuda conformance rc=$? $(tail -1 $O/conf_cuda_m.txt)" >> $O/log.txt
run m timeout 300 .carry/var/m/metrale_layer_tests --jobs 4 > $O/layer_cuda_m.txt 2>&1
echo "m cuda layer rc=$? $(tail -1 $O/layer_cuda_m.txt)" >> $O/log.txt
el cuda suites

# 2. add_rmsnorm as an early-start row (r) against main (m): its suites, then the layer's
#    small decode batches in three rounds
run r timeout 400 .carry/var/r/metrale_conformance --jobs 8 --filter 'norm/*' > $O/conf_norm_r.txt 2>&1
echo "r norm conformance rc=$? $(tail -1 $O/conf_norm_r.txt)" >> $O/log.txt
run r timeout 300 .carry/var/r/metrale_layer_tests --jobs 4 > $O/layer_cuda_r.txt 2>&1
echo "r cuda layer rc=$? $(tail -1 $O/layer_cuda_r.txt)" >> $O/log.txt
for round in 1 2 3; do
  for v in m r; do
    B $v --part layer --decode 1,2,4,8 --samples 15 --json > $O/${v}_layer_$round.json 2>>$O/stderr.txt
  done
done
el rmsnorm rounds

# 3. Vulkan on NVIDIA's driver: the loader and validation layer from Debian (not on this
#    machine), then the suites with validation, then the benches
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json  # where the device README found it
[ -e $icd ] && export VK_DRIVER_FILES=$icd
run m .carry/var/m/metrale audit --backend vulkan > $O/audit_vulkan.txt 2>&1
export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1
for t in vulkan_device vulkan_memory vulkan_shapes; do
  run m timeout 120 .carry/var/m/$t > $O/$t.txt 2>&1
  echo "m $t rc=$? $(tail -1 $O/$t.txt)" >> $O/log.txt
done
run m timeout 400 .carry/var/m/metrale_conformance --jobs 8 > $O/conf_vulkan_m.txt 2>&1
echo "m vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_m.txt)" >> $O/log.txt
run m timeout 500 .carry/var/m/metrale_layer_tests --jobs 8 > $O/layer_vulkan_m.txt 2>&1
echo "m vulkan layer rc=$? $(tail -1 $O/layer_vulkan_m.txt)" >> $O/log.txt
unset METRALE_VULKAN_VALIDATION
el vulkan suites
run m timeout 300 .carry/var/m/metrale bench --backend vulkan --samples 5 --warmup 1 --json > $O/vulkan_mixer.json 2>>$O/stderr.txt
run m timeout 200 .carry/var/m/metrale bench --backend vulkan --core --prefill 4096,16384 --samples 5 --json > $O/vulkan_core.json 2>>$O/stderr.txt
# the Vulkan step split by kernel (METRALE_VULKAN_PROFILE: a table on stderr at exit; each run
# also holds the bench's probes: 8192^3 gemm_bf16_t128 launches and a copy)
run m env METRALE_VULKAN_PROFILE=1 timeout 200 .carry/var/m/metrale bench --backend vulkan --decode 1 --samples 5 > $O/vulkan_profile_decode1.txt 2>&1
run m env METRALE_VULKAN_PROFILE=1 timeout 200 .carry/var/m/metrale bench --backend vulkan --prefill 4096 --samples 5 > $O/vulkan_profile_prefill4096.txt 2>&1
B m --samples 15 --json > $O/cuda_mixer.json 2>>$O/stderr.txt
el vulkan benches
finish
