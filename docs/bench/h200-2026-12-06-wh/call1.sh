#!/bin/bash
# 2026-12-06 (forty-ninth session): the whole-head core (delta_rule_prefill_chunked_wh_prep + _wh),
# first run.  Build (scripts/device-prepare.sh): wh = branch wh at its first commit.
# Its conformance cases; then, if they pass, the core at 4096 and 16384 tokens (one sequence, and
# 8 sequences) with the whole-head kernel and without (METRALE_NO_WHOLE_HEAD=1: the fp16 kernel,
# both on v in half).  Carry [".carry"].
#   BUDGET=540 bash docs/bench/h200-2026-12-06-wh/call1.sh
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run wh timeout $(tl 120) .carry/var/wh/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh.txt 2>&1
rc=$?
el "wh conformance rc=$rc $(tail -1 $O/conf_wh.txt)"
unset METRALE_TEST_BACKEND
if [ $rc = 0 ]; then
  for round in 1 2; do
    for off in 0 1; do
      METRALE_NO_WHOLE_HEAD=$off B wh --core --prefill 4096,16384 --samples 15 --json > $O/core_off${off}_r$round.json 2>>$O/stderr.txt
      el "core off=$off round $round rc=$? $(tail -c 400 $O/core_off${off}_r$round.json)"
      METRALE_NO_WHOLE_HEAD=$off B wh --core --prefill 16384 --seqs 8 --samples 15 --json > $O/core8_off${off}_r$round.json 2>>$O/stderr.txt
      el "core 8 seqs off=$off round $round rc=$? $(tail -c 300 $O/core8_off${off}_r$round.json)"
    done
  done
  export METRALE_TEST_BACKEND=cuda
  run wh timeout $(tl 150) .carry/var/wh/metrale_conformance --jobs 8 > $O/conf_all.txt 2>&1
  el "wh all conformance rc=$? $(tail -1 $O/conf_all.txt)"
else
  head -c 20000 $O/conf_wh.txt >> $O/log.txt
fi
finish
