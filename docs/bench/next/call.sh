#!/bin/bash
# Prepared 2026-12-06 (fifty-second session), not yet run: f2 (main + p2zero.patch: phase 2 doing
# nothing where phase 1 left every M_j zero) against fn (main): f2's whole-head conformance tests and
# cuda suites; the core of one sequence at the bench's, slow and FlashQLA's gates (--gates peer), the
# mixer's prefill rows, two rounds; ncu of f2's phases at 16384 tokens.  README.md here.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-next}
BUDGET=${BUDGET:-240}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
run f2 timeout $(tl 40) .carry/var/f2/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh.txt 2>&1
el "f2 conformance wh* rc=$? $(tail -1 $O/conf_wh.txt)"
unset METRALE_TEST_BACKEND
for r in 1 2; do
  for v in fn f2; do
    B $v --core --prefill 4096,8192,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates slow --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_slow_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 4096,16384,32768,65536 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
    el "$v round $r rc=$?"
  done
done
run f2 timeout $(tl 40) /usr/local/cuda/bin/ncu --clock-control none -k regex:delta_rule_prefill \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
  --csv .carry/var/f2/metrale bench --backend cuda --core --prefill 16384 --samples 1 --warmup 1 > $O/ncu_fast.csv 2>$O/ncu_fast.err
el "ncu rc=$?"
export METRALE_TEST_BACKEND=cuda
run f2 timeout $(tl 100) .carry/var/f2/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "f2 cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run f2 timeout $(tl 60) .carry/var/f2/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "f2 cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
finish
