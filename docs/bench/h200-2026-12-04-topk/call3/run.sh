#!/bin/bash
# call 3: why the second stream costs ~22 us at layer decode 8 and 256 when replayed as a graph
# (and wins eagerly): nsys timelines of the graph's kernels, s (second stream) and s --one-stream.
cd "$(dirname "$0")/../../../.."
O=$OUT/c3; mkdir -p $O
run() { local v=$1; shift; METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"; }
date -u > $O/log.txt
NS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda*/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: $NS" >> $O/log.txt
for b in 8 256 1; do for m in two one; do
  extra=""; [ $m = one ] && extra="--one-stream"
  run s timeout 120 $NS profile -o $O/d${b}_$m --force-overwrite true --trace=cuda --cuda-graph-trace=node \
    .carry/var/s/metrale bench --backend cuda --part layer --decode $b --prefill 64 --samples 3 --warmup 1 $extra > $O/prof_d${b}_$m.txt 2>&1
  echo "profile d$b $m rc=$?" >> $O/log.txt
  $NS stats --report cuda_gpu_trace --format csv --output $O/d${b}_$m $O/d${b}_$m.nsys-rep > /dev/null 2>&1
  rm -f $O/d${b}_$m.nsys-rep $O/d${b}_$m.sqlite
done; done
ls -la $O >> $O/log.txt
tar czf $OUT/c3.tgz -C $OUT c3 && cp $O/log.txt $OUT/log.txt && rm -rf $O
