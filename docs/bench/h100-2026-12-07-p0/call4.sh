#!/bin/bash
# Prepared 2026-12-07 (fifty-sixth session).  Builds: a4 (d7fea39: main's kernels since the merge
# of a4) and tc (branch tc: phase 0's blocked inverse on the tensor cores, mma m16n8k8 with tf32
# splits; docs/perf-prefill.md part 30).  tc's cuda suites, three rounds of the core's rows and the
# mixer's prefill for both builds in turn, ncu's source view of tc's phase 0.
# Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-tc}
BUDGET=${BUDGET:-420}
. scripts/device-call.sh
suites tc
for v in a4 tc; do # the fixtures' errors, T's bits being new in tc
  run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 METRALE_CF_LOG_NMSE=1 timeout $(tl 60) \
    .carry/var/$v/metrale_conformance --jobs 8 --filter 'gdn*/*' > $O/nmse_$v.txt 2>&1
  el "$v gdn nmse rc=$? $(tail -1 $O/nmse_$v.txt)"
done
for r in 1 2 3; do
  for v in a4 tc; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    B $v --core --gates peer --prefill 16384 --samples 15 --json > $O/${v}_peer_$r.json 2>>$O/stderr.txt
    B $v --part mixer --prefill 4096,16384 --samples 15 --json > $O/${v}_mixer_$r.json 2>>$O/stderr.txt
  done
  el "round $r rc=$?"
done
kernel_view tc wh_prep_qkh 0 phase0 MemoryWorkloadAnalysis_Tables
finish
