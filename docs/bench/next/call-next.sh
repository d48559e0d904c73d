#!/bin/bash
# Prepared 2026-12-07 (sixtieth session) after docs/bench/h100-2026-12-07-r4q/ (its second call, which
# got no machine).  Builds (`scripts/device-prepare.sh NAME PATCH...` on main, ce6dc70 or later, which has
# gdn_decode_pair35_r4): mn = main; cr4 = main + cluster_r4.patch (gdn_decode_cluster35_r4 up to batch 4
# at four value heads a key head; gdn_decode_cluster35 bounded to five blocks an SM, since as the
# template's W = 32 case ptxas gave it 60 registers and the bench's decode 4 lost 2.6 us); wd = cr4 +
# wide.patch (decode batches 1-2 keep in_proj on the gemv however wide: at 397B's shape they ran on 81
# fp16 128x256 tiles).  wd's suites (with modes/wide_in_proj_decodes_small_batches_on_the_gemv) and the
# sanitizers on the cluster kernels' tests; that layer test on cr4's library, where it must fail; wd's
# audit at 397B; the three builds at the 397B, 122B and bench's shapes, three rounds; ncu kernel times
# of mn and wd at 397B decode 1, 8, 64; the layer (MoE) at 397B.  On an H200 also main's suites and the
# issue-6 table (two rounds).  Carry [".carry"] (rm .carry/var/*/libmetrale-backend-vulkan.so
# .carry/var/*/vulkan_* first: no Vulkan here).
cd "$(dirname "$0")/../../.."
CALL=${CALL:-wd}
BUDGET=${BUDGET:-540}
. scripts/device-call.sh
S397=docs/shapes/qwen3_5_397b_a17b.json
S122=docs/shapes/qwen3_5_122b_a10b.json
run wd timeout 30 .carry/var/wd/metrale bench --backend cuda --config $S397 --decode 1,8 --prefill 64 --samples 2 \
  --warmup 1 > "$O/smoke.txt" 2>&1
el "wd smoke rc=$?"
ab() { # round R: every build at the three shapes (skipped with less than 70 s left)
  local r=$1
  [ "$(tl 70)" -lt 70 ] && { el "round $r skipped"; return; }
  for v in mn cr4 wd w64 w160; do
    B $v --config $S397 --decode 1,2,3,4,5,8,16,64,256 --prefill 64 --samples 15 --json > "$O/${v}_397_$r.json" 2>>"$O/stderr.txt"
    B $v --config $S122 --decode 1,2,4,8,64 --prefill 64 --samples 15 --json > "$O/${v}_122_$r.json" 2>>"$O/stderr.txt"
    B $v --decode 1,2,3,4,8,64,256 --prefill 64 --samples 15 --json > "$O/${v}_a3b_$r.json" 2>>"$O/stderr.txt"
    el "$v round $r rc=$?"
  done
}
ab 1
for v in mn wd w64 w160; do
  run $v timeout "$(tl 45)" /usr/local/cuda/bin/ncu --clock-control none -k 'regex:gemm|gemv|gdn_decode|f32_to_f16' \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv .carry/var/$v/metrale bench --backend cuda --config $S397 \
    --decode 1,8,64 --prefill 64 --samples 1 --warmup 0 --no-graphs > "$O/ncu_$v.csv" 2>&1
  el "$v ncu rc=$?"
done
# w160 = w64 + n160.patch (the same kernel on 64x160 tiles: 129 of them at 397B's 20608 columns)
suites w160 'gemm/*' 'modes/*'
# w64 = cr4 + ws64.patch (gemm_f16_ws64: whole-K 64x256 tiles, no pairs, in_proj at decode <= 64 where
# no split form fits: 397B's and 122B's 81 tiles; decode 1-2 there too, without wide.patch)
suites w64 'gemm/*' 'modes/*'
suites wd
for t in memcheck racecheck synccheck; do
  run wd env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 timeout "$(tl 60)" \
    /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/wd/metrale_conformance --jobs 1 \
    --filter 'gdn_decode/*cluster35*' > "$O/${t}_cl.txt" 2>&1
  el "wd $t rc=$? $(tail -1 "$O/${t}_cl.txt")"
done
for t in memcheck racecheck; do
  for v in w64 w160; do
  run $v env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 timeout "$(tl 60)" \
    /usr/local/cuda/bin/compute-sanitizer --tool $t --error-exitcode 9 .carry/var/$v/metrale_conformance --jobs 1 \
    --filter 'gemm/gemm_f16_ws64' > "$O/${t}_$v.txt" 2>&1
  el "$v $t rc=$? $(tail -1 "$O/${t}_$v.txt")"
  done
done
run w64 timeout "$(tl 60)" .carry/var/w64/metrale audit --backend cuda --config $S397 > "$O/audit_w64.txt" 2>&1
el "w64 audit rc=$?"
# the new layer test (wd's binary) on cr4's library (no wide.patch): it must fail there
run cr4 env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1 timeout 60 .carry/var/wd/metrale_layer_tests \
  --filter 'modes/wide_in*' > "$O/wide_test_on_cr4.txt" 2>&1
el "wide test on cr4 (must fail) rc=$? $(tail -1 "$O/wide_test_on_cr4.txt")"
run wd timeout "$(tl 60)" .carry/var/wd/metrale audit --backend cuda --config $S397 > "$O/audit_wd.txt" 2>&1
el "wd audit rc=$?"
ab 2
ab 3
if grep -q H200 "$O/gpu.txt"; then
  suites mn
  for r in 1 2; do
    [ "$(tl 100)" -lt 100 ] && break
    table_rows mn $r
    el "table round $r rc=$?"
  done
else
  el "not an H200: $(sed -n 2p "$O/gpu.txt"); no table"
fi
for v in mn wd w64; do
  [ "$(tl 60)" -lt 60 ] && break
  run $v timeout "$(tl 120)" .carry/var/$v/metrale bench --backend cuda --config $S397 --part layer --decode 1,64 \
    --prefill 4096 --samples 10 --json > "$O/${v}_397layer.json" 2>>"$O/stderr.txt"
  el "$v 397 layer rc=$?"
done
finish
