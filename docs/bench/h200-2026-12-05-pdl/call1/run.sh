#!/bin/bash
# Call 1 of 2026-12-05 as it ran (`bash run.sh cuda`, carry [".carry", ".gl"]), from
# docs/bench/next/call1/run.sh of that morning; m = main 3649650, r = m +
# add_rmsnorm_early_start.patch (this folder).  Its part `vk` was never run.
cd "$(dirname "$0")/../../../.."
PART=${1:?cuda or vk}
CALL=c1$PART
. scripts/device-call.sh
tl() { local left=$((560 - ($(date +%s) - T0))); [ $left -lt 5 ] && left=5; [ "$1" -lt $left ] && echo "$1" || echo $left; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
vulkan_env() {
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  [ -e $icd ] && export VK_DRIVER_FILES=$icd
}
if [ "$PART" = cuda ]; then
  export METRALE_TEST_BACKEND=cuda
  run m timeout $(tl 150) .carry/var/m/metrale_conformance --jobs 8 > $O/conf_cuda_m.txt 2>&1
  echo "m cuda conformance rc=$? $(tail -1 $O/conf_cuda_m.txt)" >> $O/log.txt
  run m timeout $(tl 120) .carry/var/m/metrale_layer_tests --jobs 4 > $O/layer_cuda_m.txt 2>&1
  echo "m cuda layer rc=$? $(tail -1 $O/layer_cuda_m.txt)" >> $O/log.txt
  el cuda suites
  run r timeout $(tl 60) .carry/var/r/metrale_conformance --jobs 8 --filter 'norm/*' > $O/conf_norm_r.txt 2>&1
  echo "r norm conformance rc=$? $(tail -1 $O/conf_norm_r.txt)" >> $O/log.txt
  run r timeout $(tl 120) .carry/var/r/metrale_layer_tests --jobs 4 > $O/layer_cuda_r.txt 2>&1
  echo "r cuda layer rc=$? $(tail -1 $O/layer_cuda_r.txt)" >> $O/log.txt
  for round in 1 2 3; do
    for v in m r; do
      run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend cuda --part layer --decode 1,2,4,8 --samples 15 --json > $O/${v}_layer_$round.json 2>>$O/stderr.txt
    done
  done
  el rmsnorm rounds
  run m timeout $(tl 90) .carry/var/m/metrale bench --backend cuda --samples 15 --json > $O/cuda_mixer.json 2>>$O/stderr.txt
  el cuda mixer
  vulkan_env
  run m .carry/var/m/metrale audit --backend vulkan > $O/audit_vulkan.txt 2>&1
  export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1
  for t in vulkan_device vulkan_memory vulkan_shapes; do
    run m timeout $(tl 90) .carry/var/m/$t > $O/$t.txt 2>&1
    echo "m $t rc=$? $(tail -1 $O/$t.txt)" >> $O/log.txt
  done
  run m timeout $(tl 300) .carry/var/m/metrale_conformance --jobs 8 > $O/conf_vulkan_m.txt 2>&1
  echo "m vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_m.txt)" >> $O/log.txt
  el vulkan suites
fi
finish
