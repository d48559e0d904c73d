#!/bin/bash
# 2026-12-06 (forty-sixth session): Vulkan's small host copies recorded with vkCmdUpdateBuffer
# (cee1b7a) on NVIDIA's driver, against waiting for the stream before each, and main's suites with
# the new conformance test memory/host_copies_queue_in_order_with_device_copies.  Builds, made by
# scripts/device-prepare.sh at cc9c21d or later:
#   v  main's head
#   w  v + vk_wait_each_h2d.patch (Vulkan's copy_h2d of e540141: it finishes the stream first)
# Then `bench --cycle` on cuda (decode steps going round 12 or 4 batch sizes, graphs and eager), the
# Vulkan layer suite and,
# if time is left, v's cuda table rows (mixer and layer; the layer's with the FFN chunk of
# 1fb124a).  Carry [".carry", ".gl"] with .carry/var/{v,w}.
#   BUDGET=540 bash docs/bench/h200-2026-12-06-lists/call2.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
vulkan_env
for round in 1 2; do
  for v in v w; do
    run $v timeout $(tl 60) .carry/var/$v/metrale bench --backend vulkan --new-slots --decode 1,8,64 --prefill 64 \
      --samples 5 --warmup 1 --json > $O/${v}_vk_new_r$round.json 2>>$O/stderr.txt
    el "$v vulkan new slots round $round rc=$?"
  done
  run v timeout $(tl 60) .carry/var/v/metrale bench --backend vulkan --decode 1,8,64 --prefill 64 \
    --samples 5 --warmup 1 --json > $O/v_vk_fixed_r$round.json 2>>$O/stderr.txt
  el "v vulkan fixed slots round $round rc=$?"
done
export METRALE_TEST_REQUIRE_BACKEND=1
METRALE_TEST_BACKEND=cuda run v timeout $(tl 150) .carry/var/v/metrale_conformance --jobs 8 > $O/conf_cuda_v.txt 2>&1
el "v cuda conformance rc=$? $(tail -1 $O/conf_cuda_v.txt)"
export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1
for t in vulkan_device vulkan_memory vulkan_shapes; do
  run v timeout $(tl 60) .carry/var/v/$t > $O/${t}_v.txt 2>&1
  el "v $t rc=$? $(tail -1 $O/${t}_v.txt)"
done
run v timeout $(tl 200) .carry/var/v/metrale_conformance --jobs 8 > $O/conf_vulkan_v.txt 2>&1
el "v vulkan conformance rc=$? $(tail -1 $O/conf_vulkan_v.txt)"
unset METRALE_TEST_BACKEND METRALE_VULKAN_VALIDATION
# decode steps whose batch size changes every step: 12 sizes (more than the layer's 8 recordings)
# and 4, replayed as graphs and launched eagerly
for round in 1 2; do
  for sizes in 1,2,3,4,5,6,7,8,9,10,11,12 1,2,4,8; do
    for g in graphs eager; do
      flag=; [ $g = eager ] && flag=--no-graphs
      for part in mixer layer; do
        B v --part $part --cycle --decode $sizes --prefill 64 --samples 15 $flag --json \
          > $O/v_cycle_${part}_$(echo $sizes | tr , _)_${g}_r$round.json 2>>$O/stderr.txt
        el "v cycle $part $sizes $g round $round rc=$?"
      done
    done
  done
done
export METRALE_TEST_BACKEND=vulkan METRALE_VULKAN_VALIDATION=1
run v timeout $(tl 200) .carry/var/v/metrale_layer_tests --jobs 8 > $O/layer_vulkan_v.txt 2>&1
el "v vulkan layer rc=$? $(tail -1 $O/layer_vulkan_v.txt)"
unset METRALE_TEST_BACKEND METRALE_VULKAN_VALIDATION
B v --samples 15 --json > $O/v_mixer.json 2>>$O/stderr.txt
el "v mixer rc=$?"
B v --part layer --samples 15 --json > $O/v_layer.json 2>>$O/stderr.txt
el "v layer rc=$?"
finish
