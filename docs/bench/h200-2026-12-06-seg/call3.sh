#!/bin/bash
# 2026-12-06: build sg2 (branch seg with the ops' 24-chunk rule): the whole-head conformance tests
# and layer test, then the issue-6 rows (mixer decode 1/8/64/256, prefill 4096/16384; core
# 4096/16384/65536), three rounds, and one round with METRALE_WH_SEGMENTS=0 (the fp16 core for one
# sequence, as main).  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call3}
BUDGET=${BUDGET:-400}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version --format=csv >> $O/log.txt 2>&1
export METRALE_TEST_REQUIRE_BACKEND=1 METRALE_TEST_BACKEND=cuda
run sg2 timeout $(tl 120) .carry/var/sg2/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh.txt 2>&1
el "sg2 conformance wh* rc=$? $(tail -1 $O/conf_wh.txt)"
run sg2 timeout $(tl 60) .carry/var/sg2/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh.txt 2>&1
el "sg2 layer wh test rc=$? $(tail -1 $O/layer_wh.txt)"
unset METRALE_TEST_BACKEND
for r in 1 2 3; do
  B sg2 --part mixer --decode 1,8,64,256 --prefill 4096,16384 --samples 15 --json > $O/mixer_r$r.json 2>>$O/stderr.txt
  B sg2 --core --prefill 4096,16384,65536 --samples 15 --json > $O/core_r$r.json 2>>$O/stderr.txt
  el "round $r"
done
METRALE_WH_SEGMENTS=0 B sg2 --part mixer --prefill 4096,16384 --samples 15 --json > $O/mixer_n0.json 2>>$O/stderr.txt
METRALE_WH_SEGMENTS=0 B sg2 --core --prefill 4096,16384,65536 --samples 15 --json > $O/core_n0.json 2>>$O/stderr.txt
run sg2 .carry/var/sg2/metrale audit --backend cuda > $O/audit.txt 2>&1
el "n0 and audit done"
finish
