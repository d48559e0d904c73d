#!/bin/bash
# 2026-12-06 (fifty-first session): main's head (be8bfdc, build mn: the whole-head core in
# segments for one sequence) on the device: the cuda conformance and layer suites, the audit, the
# issue-6 table's rows in three rounds (mixer, core, layer); and build p2 (branch p2: wh_seg's
# phase 2 register-blocked) and p0 (branch p0: wh_prep a block a (chunk, key head)) against it: their
# whole-head conformance tests and the core in rounds beside mn's.  Carry [".carry"].
cd "$(dirname "$0")/../../.."
CALL=${CALL:-call1}
BUDGET=${BUDGET:-560}
. scripts/device-call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > $O/gpu.txt 2>&1
export METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1
for v in p2 p0; do
  run $v timeout $(tl 60) .carry/var/$v/metrale_conformance --filter 'gdn/delta_rule_prefill_chunked_wh*' > $O/conf_wh_$v.txt 2>&1
  el "$v conformance wh* rc=$? $(tail -1 $O/conf_wh_$v.txt)"
done
run p0 timeout $(tl 60) .carry/var/p0/metrale_layer_tests --filter 'modes/prefill_takes_the_whole_head*' > $O/layer_wh_p0.txt 2>&1
el "p0 layer wh test rc=$? $(tail -1 $O/layer_wh_p0.txt)"
run mn timeout $(tl 150) .carry/var/mn/metrale_conformance --jobs 8 > $O/conf_cuda.txt 2>&1
el "mn cuda conformance rc=$? $(tail -1 $O/conf_cuda.txt)"
run mn timeout $(tl 150) .carry/var/mn/metrale_layer_tests --jobs 8 > $O/layer_cuda.txt 2>&1
el "mn cuda layer suite rc=$? $(tail -1 $O/layer_cuda.txt)"
unset METRALE_TEST_BACKEND
run mn .carry/var/mn/metrale audit --backend cuda > $O/audit.txt 2>&1
for r in 1 2 3; do
  B mn --samples 15 --json > $O/mn_mixer_$r.json 2>>$O/stderr.txt
  el "mixer round $r rc=$?"
  for v in mn p2 p0; do
    B $v --core --prefill 4096,16384,65536 --samples 15 --json > $O/${v}_core_$r.json 2>>$O/stderr.txt
    el "$v core round $r rc=$?"
  done
  B mn --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > $O/mn_layer_$r.json 2>>$O/stderr.txt
  el "layer round $r rc=$?"
done
for v in mn p0; do # phase 0 as the whole-head path without segments takes it: 8 sequences
  B $v --core --prefill 16384,65536 --seqs 8 --samples 15 --json > $O/${v}_core8.json 2>>$O/stderr.txt
  el "$v core 8 seqs rc=$?"
done
finish
