#!/bin/bash
# Prepared 2026-12-07 (fifty-ninth session).  Builds: mn = main (`scripts/device-prepare.sh mn`), cv =
# main + cv.patch (METRALE_CUDA_CARVEOUT: every kernel's preferred shared-memory carve-out; unset, the
# same as mn).  On an H200: mn's suites, audit and three rounds of the issue-6 table.  On any GPU: the
# carve-out's second A/B (call 1 of docs/bench/h100-2026-12-07-carve: at 100 and 50 slower; which
# configuration each kernel got at 50 and 57, and the decode rows at 57, where the gemvs' 132 KB and the
# cluster kernel's 64 KB configurations of the driver's choice could become one).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-h200}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
ce() { if [ $1 = unset ]; then e=(env -u METRALE_CUDA_CARVEOUT); else e=(env METRALE_CUDA_CARVEOUT=$1); fi; }
cvab() { # round R: cv with the carve-out unset and at 57; the mixer's and the layer's small decode rows
  local r=$1
  for c in unset 57; do
    ce $c
    run cv "${e[@]}" timeout 200 .carry/var/cv/metrale bench --backend cuda --decode 1,2,4,8 --prefill 64 \
      --samples 15 --json > "$O/cv${c}_mixer_$r.json" 2>>"$O/stderr.txt"
    run cv "${e[@]}" timeout 200 .carry/var/cv/metrale bench --backend cuda --part layer --decode 1,2 --prefill 64 \
      --samples 15 --json > "$O/cv${c}_layer_$r.json" 2>>"$O/stderr.txt"
    el "cv $c round $r rc=$?"
  done
}
for c in 50 57; do
  ce $c
  run cv "${e[@]}" timeout "$(tl 90)" /usr/local/cuda/bin/ncu --clock-control none --section LaunchStats -k "regex:gemv|gdn_decode" \
    --launch-count 3 .carry/var/cv/metrale bench --backend cuda --decode 1 --prefill 64 --no-graphs --samples 1 --warmup 0 \
    > "$O/ncu_launch_$c.txt" 2>&1
  el "ncu launch stats $c rc=$? $(grep 'Configuration Size' "$O/ncu_launch_$c.txt" | awk '{print $NF}' | tr '\n' ' ')"
done
cvab 1
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
