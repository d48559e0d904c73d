#!/bin/bash
# Prepared 2026-12-07 (fifty-fourth session): main's rows of the issue-6 table on an H200.  Builds:
# p6 (what main runs since 914f1d2: the planes pair, p2zero, the staged conv, phase 0 at six blocks;
# built at a1894fe + the six-block patch, comments aside the same code) and mn (main at 36f9e43,
# before the staged conv and the six blocks).  p6's cuda conformance and layer suites, its audit,
# then two rounds of the table's rows for p6 and the core and mixer prefill rows for mn; last, ncu's
# source view of phase 3 at 16384 tokens (stall reasons by SASS line: perf-prefill part 28's Next).
# TABLE=0 leaves out everything but that view (for an H100, whose rows call 2 of
# docs/bench/h100-2026-12-07-planes measured).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-h200}
BUDGET=${BUDGET:-280}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
if [ "${TABLE:-1}" = 1 ]; then
suites p6
run p6 timeout $(tl 30) .carry/var/p6/metrale audit --backend cuda > $O/audit_p6.txt 2>&1
for r in 1 2; do
  B p6 --samples 15 --json > $O/p6_mixer_$r.json 2>>$O/stderr.txt
  B p6 --core --prefill 4096,16384,65536 --samples 15 --json > $O/p6_core_$r.json 2>>$O/stderr.txt
  B p6 --core --gates slow --prefill 4096,16384,65536 --samples 15 --json > $O/p6_slow_$r.json 2>>$O/stderr.txt
  B p6 --core --gates peer --prefill 16384,32768 --samples 15 --json > $O/p6_peer_$r.json 2>>$O/stderr.txt
  el "p6 round $r rc=$?"
  B mn --part mixer --prefill 4096,16384 --samples 15 --json > $O/mn_mixer_$r.json 2>>$O/stderr.txt
  B mn --core --prefill 4096,16384,65536 --samples 15 --json > $O/mn_core_$r.json 2>>$O/stderr.txt
  el "mn round $r rc=$?"
  B p6 --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/p6_layer_$r.json 2>>$O/stderr.txt
  el "p6 layer round $r rc=$?"
done
fi
run p6 timeout $(tl 120) /usr/local/cuda/bin/ncu --clock-control none -k regex:wh_seg --launch-skip 2 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --import-source no -f -o /tmp/phase3 \
  .carry/var/p6/metrale bench --backend cuda --core --prefill 16384 --samples 1 --warmup 0 > $O/ncu_phase3.txt 2>&1
el "ncu phase 3 rc=$?"
run p6 timeout $(tl 60) /usr/local/cuda/bin/ncu -i /tmp/phase3.ncu-rep --page source --csv --print-source sass \
  > $O/phase3_source.csv 2>>$O/ncu_phase3.txt
el "ncu phase 3 source page rc=$? $(wc -c < $O/phase3_source.csv) bytes"
run p6 timeout $(tl 30) /usr/local/cuda/bin/ncu -i /tmp/phase3.ncu-rep --page details --csv > $O/phase3_details.csv 2>>$O/ncu_phase3.txt
finish
