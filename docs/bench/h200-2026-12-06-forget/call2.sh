#!/bin/bash
# 2026-12-06 (fifty-second session), call 2: fn (branch skip's head: w0, the passes leaving out what
# the gates made the state forget, w0 = 1 where a sequence forgets each segment's start, the
# forgetting test's loads in flight, segments from 12 chunks a segment) against mn (main):
# fn's cuda conformance and layer suites and its audit; the core at 2048 to 65536 tokens at both
# gates (and at 2048 in 5 segments), as 8 sequences; the mixer's rows and the layer's, three rounds;
# ncu of fn's core at 16384 tokens, phase by phase.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call2}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run fn timeout $(tl 120) .carry/var/fn/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "fn cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run fn timeout $(tl 90) .carry/var/fn/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "fn cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
run fn .carry/var/fn/metrale audit --backend cuda > $O/audit.txt 2>&1
for r in 1 2 3; do
  for v in mn fn; do
    B $v --core --prefill 2048,4096,8192,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 2048,4096,8192,16384,65536 --samples 15 --json > $O/${v}_slow_$r.json 2>>$O/stderr.txt
    B $v --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/${v}_core8_$r.json 2>>$O/stderr.txt
    B $v --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
    el "$v core and mixer round $r rc=$?"
  done
  METRALE_WH_SEGMENTS=5 B fn --core --prefill 2048 --samples 15 --json > $O/fn_core5_$r.json 2>>$O/stderr.txt
  METRALE_WH_SEGMENTS=5 B fn --core --gates slow --prefill 2048 --samples 15 --json > $O/fn_slow5_$r.json 2>>$O/stderr.txt
  B fn --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/fn_layer_$r.json 2>>$O/stderr.txt
  el "fn layer round $r rc=$?"
done
# where fn's one-sequence core goes, phase by phase (ncu, clocks free), at both gates
for gt in fast slow; do
  run fn timeout $(tl 60) /usr/local/cuda/bin/ncu --clock-control none -k regex:delta_rule_prefill \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
    --csv .carry/var/fn/metrale bench --backend cuda --core --gates $gt --prefill 16384 --samples 1 --warmup 1 \
    > $O/ncu_$gt.csv 2>$O/ncu_$gt.err
  el "ncu $gt rc=$?"
done
finish
