#!/bin/bash
# Prepared 2026-12-07 (fifty-ninth session).  Builds: mn = main (`scripts/device-prepare.sh mn`), cv =
# main + cv.patch (METRALE_CUDA_CARVEOUT: every kernel's preferred shared-memory carve-out; unset, the
# same as mn).  On an H200: mn's suites, audit and three rounds of the issue-6 table.  On any GPU: the
# carve-out A/B (perf-decode.md section 10's untested guess: kernels of one step given different
# carve-outs by the driver cannot share an SM, which costs the early starts).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-h200}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
cvab() { # round R: cv with the carve-out unset, 100 and 50; the mixer's and the layer's decode rows, the mixer's prefill
  local r=$1
  for c in unset 100 50; do
    if [ $c = unset ]; then e=(env -u METRALE_CUDA_CARVEOUT); else e=(env METRALE_CUDA_CARVEOUT=$c); fi
    run cv "${e[@]}" timeout 200 .carry/var/cv/metrale bench --backend cuda --decode 1,2,8,64,256 --prefill 4096,16384 \
      --samples 15 --json > "$O/cv${c}_mixer_$r.json" 2>>"$O/stderr.txt"
    run cv "${e[@]}" timeout 200 .carry/var/cv/metrale bench --backend cuda --part layer --decode 1,64,256 --prefill 4096 \
      --samples 15 --json > "$O/cv${c}_layer_$r.json" 2>>"$O/stderr.txt"
    el "cv $c round $r rc=$?"
  done
}
run cv env METRALE_CUDA_CARVEOUT=101 .carry/var/cv/metrale bench --backend cuda --decode 1 --samples 1 > "$O/cv_bad.txt" 2>&1
el "cv carve-out 101 rc=$? $(tail -1 "$O/cv_bad.txt")"
cvab 1
# each decode-1 kernel's shared-memory configuration as the driver chose it, unset and at 100
for c in unset 100; do
  if [ $c = unset ]; then e=(env -u METRALE_CUDA_CARVEOUT); else e=(env METRALE_CUDA_CARVEOUT=$c); fi
  run cv "${e[@]}" timeout "$(tl 90)" /usr/local/cuda/bin/ncu --clock-control none --section LaunchStats -k "regex:gemv|gdn_decode" --launch-count 6 \
    .carry/var/cv/metrale bench --backend cuda --decode 1 --prefill 64 --no-graphs --samples 1 --warmup 0 \
    > "$O/ncu_launch_$c.txt" 2>&1
  el "ncu launch stats $c rc=$?"
done
if grep -q H200 "$O/gpu.txt"; then
  suites mn
  run mn timeout "$(tl 60)" .carry/var/mn/metrale audit --backend cuda > "$O/audit_mn.txt" 2>&1
  el "mn audit rc=$?"
  for r in 1 2 3; do
    table_rows mn $r
    el "round $r rc=$?"
  done
else
  el "not an H200: $(sed -n 2p "$O/gpu.txt"); no table"
fi
cvab 2
cvab 3
finish
