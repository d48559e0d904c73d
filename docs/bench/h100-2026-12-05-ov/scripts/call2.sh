#!/bin/bash
# call1's timing build again (modes 0, 1, 2 of overlap_timing.patch), and whether the side
# stream's kernels really run beside phase 1: one mode-1 prefill under nsys, if the machine has it.
#   BUDGET=420 bash docs/bench/h100-2026-12-05-ov/scripts/call2.sh
cd "$(dirname "$0")/../../../.."
CALL=${CALL:-call2}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
(which nsys ncu; ls /usr/local/cuda/bin; ls -d /opt/nvidia/nsight-systems* /usr/local/cuda/nsight-systems* 2>&1) > $O/tools.txt 2>&1
for round in 1 2 3; do
  for m in 0 1 2; do
    run ov env METRALE_TIMING_OVERLAP=$m timeout $(tl 60) .carry/var/ov/metrale bench --backend cuda --decode 1 \
      --prefill 4096,16384 --samples 15 --json > $O/mixer_m${m}_r$round.json 2>>$O/stderr.txt
    el "mixer mode $m round $round rc=$?"
  done
done
NSYS=$(which nsys 2>/dev/null || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
if [ -n "$NSYS" ]; then
  for m in 0 1; do
    run ov env METRALE_TIMING_OVERLAP=$m timeout $(tl 90) $NSYS profile -o $O/ov_m$m --force-overwrite true \
      .carry/var/ov/metrale bench --backend cuda --decode 1 --prefill 4096 --samples 3 --warmup 1 > $O/nsys_m$m.txt 2>&1
    timeout $(tl 60) $NSYS stats --report cuda_gpu_trace --format csv -o $O/trace_m$m $O/ov_m$m.nsys-rep >> $O/nsys_m$m.txt 2>&1
    rm -f $O/ov_m$m.nsys-rep $O/ov_m$m.sqlite
    el "nsys mode $m"
  done
fi
finish
