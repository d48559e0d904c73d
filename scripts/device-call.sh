# Sourced by a device call's run.sh (docs/bench/<gpu>-<date>-<topic>/callN/run.sh), from the
# repository root on the device machine, after it sets CALL (the call's name, e.g. c3); records the
# GPU in gpu.txt and gives it:
#   run V CMD...        CMD with build V's libraries and backends (.carry/var/V) first
#   B V ARGS...         `metrale bench --backend cuda ARGS` of build V (200 s at most)
#   suites V [CF] [LF]  build V's cuda conformance suite and layer suite (filtered by the Criterion
#                       patterns CF and LF where given) into conf_cuda_V.txt and layer_cuda_V.txt,
#                       each one's last line into the log
#   table_rows V R      the issue-6 table's rows of build V (mixer, core at three gates, layer), round R
#   prefill_rows V R    a prefill change's rows of build V (core, FlashQLA's gates, mixer prefill), round R
#   kernel_view V RE SKIP NAME [SECTION...]
#                       ncu's source view of one launch of build V's kernel matching RE (after SKIP
#                       launches) in the core's bench at 16384 tokens, with ncu's SpeedOfLight,
#                       WarpStateStats, SourceCounters and the SECTIONs: NAME_source.csv (stall
#                       samples by SASS line; read with scripts/ncu-source.py), NAME_details.csv,
#                       ncu_NAME.txt
#   phase3_view V       kernel_view of the whole-head core's phase 3 (wh_seg's third launch): phase3_*
#   el WHAT             a line "[seconds since the start] WHAT" in the call's log
#   tl S                S, or what is left of BUDGET s (560 unless set) if less: a step's timeout,
#                       so that finish always runs inside one `run`'s 10 minutes
#   vulkan_env          NVIDIA's Vulkan driver usable: the loader, validation layer and glvnd
#                       carried in .gl/ unpacked, the ICD named; what was found in vulkan_icd.txt
#   finish              the JSON summaries into the log, the call's folder packed as $OUT/$CALL.tgz
# The builds are carried in .carry/var/<V>/ (metrale, the test binaries, libmetrale*.so and the
# backend modules); .carry/lib holds the test binaries' shared libraries (Criterion's).
O=$OUT/$CALL
mkdir -p "$O"
T0=$(date +%s)
date -u > "$O/log.txt"
# which GPU ran the call, at what clocks
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv > "$O/gpu.txt" 2>&1
el() { echo "[$(($(date +%s) - T0))s] $*" >> "$O/log.txt"; }
tl() {
  local left=$((${BUDGET:-560} - ($(date +%s) - T0)))
  [ $left -lt 5 ] && left=5
  [ "$1" -lt $left ] && echo "$1" || echo $left
}
run() {
  local v=$1
  shift
  METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/var/$v:$PWD/.carry/lib "$@"
}
# Each build must load its own libmetrale.so.0 (the layer, the ops and the kernel manifest that
# its backend modules look their kernels up in).  With .carry/lib first in the path and a
# libmetrale there, every build ran with that one library: on 2026-12-05 main's cuda module ran
# with a patched build's manifest, which made add_rmsnorm an early-start row whose kernel did not
# wait (the "race" of docs/bench/h200-2026-12-05-pdl; perf-decode.md section 30).  So the call
# stops here unless every build resolves its own.
libs_ok=1
if ls .carry/lib/libmetrale* > /dev/null 2>&1; then
  echo "a libmetrale in .carry/lib: $(ls .carry/lib/libmetrale*)" >> "$O/log.txt"
  libs_ok=0
fi
for d in .carry/var/*/; do
  v=$(basename "$d")
  [ -x "$d/metrale" ] || continue
  got=$(run "$v" ldd "$d/metrale" | awk '/libmetrale.so/ {print $3}')
  echo "build $v ($(cat "$d/REVISION" 2>/dev/null || echo "revision not recorded")) loads $got" >> "$O/log.txt"
  [ "$(readlink -f "$got")" = "$(readlink -f "$d/libmetrale.so.0")" ] || libs_ok=0
done
if [ $libs_ok != 1 ]; then
  echo "a build would not load its own libmetrale.so.0: stopped (log.txt)" >&2
  cp "$O/log.txt" "$OUT/log.txt"
  exit 1
fi
B() { run "$1" timeout 200 ".carry/var/$1/metrale" bench --backend cuda "${@:2}"; }
suites() {
  local v=$1 cf=${2:-} lf=${3:-} t=(env METRALE_TEST_BACKEND=cuda METRALE_TEST_REQUIRE_BACKEND=1)
  run "$v" "${t[@]}" timeout "$(tl 100)" ".carry/var/$v/metrale_conformance" --jobs 8 ${cf:+--filter "$cf"} \
    > "$O/conf_cuda_$v.txt" 2>&1
  el "$v cuda conformance${cf:+ ($cf)} rc=$? $(tail -1 "$O/conf_cuda_$v.txt")"
  run "$v" "${t[@]}" timeout "$(tl 60)" ".carry/var/$v/metrale_layer_tests" --jobs 8 ${lf:+--filter "$lf"} \
    > "$O/layer_cuda_$v.txt" 2>&1
  el "$v cuda layer suite${lf:+ ($lf)} rc=$? $(tail -1 "$O/layer_cuda_$v.txt")"
}
# The issue-6 table's rows of build V, round R: the mixer (decode 1, 8, 64, 256; prefill 4096,
# 16384), the core at the bench's, slow and FlashQLA's gates, the layer: $O/V_{mixer,core,slow,peer,layer}_R.json
table_rows() {
  local v=$1 r=$2
  B "$v" --samples 15 --json > "$O/${v}_mixer_$r.json" 2>>"$O/stderr.txt"
  B "$v" --core --prefill 4096,16384,65536 --samples 15 --json > "$O/${v}_core_$r.json" 2>>"$O/stderr.txt"
  B "$v" --core --gates slow --prefill 4096,16384,65536 --samples 15 --json > "$O/${v}_slow_$r.json" 2>>"$O/stderr.txt"
  B "$v" --core --gates peer --prefill 16384,32768 --samples 15 --json > "$O/${v}_peer_$r.json" 2>>"$O/stderr.txt"
  B "$v" --part layer --decode 1,2,64,256 --prefill 4096,16384 --samples 15 --json > "$O/${v}_layer_$r.json" \
    2>>"$O/stderr.txt"
}
# A prefill change's rows of build V, round R (an A/B runs them for each build in turn): the core at
# the bench's gates (4096, 16384, 65536) and FlashQLA's (16384), the mixer's prefill (4096, 16384)
prefill_rows() {
  local v=$1 r=$2
  B "$v" --core --prefill 4096,16384,65536 --samples 15 --json > "$O/${v}_core_$r.json" 2>>"$O/stderr.txt"
  B "$v" --core --gates peer --prefill 16384 --samples 15 --json > "$O/${v}_peer_$r.json" 2>>"$O/stderr.txt"
  B "$v" --part mixer --prefill 4096,16384 --samples 15 --json > "$O/${v}_mixer_$r.json" 2>>"$O/stderr.txt"
}
kernel_view() { # V REGEX SKIP NAME [SECTION...]: ncu's source view of one launch at 16384 tokens
  local v=$1 re=$2 skip=$3 name=$4 ncu=/usr/local/cuda/bin/ncu sec=()
  shift 4
  for x in SpeedOfLight WarpStateStats SourceCounters "$@"; do sec+=(--section "$x"); done
  run "$v" timeout "$(tl 120)" $ncu --clock-control none -k "regex:$re" --launch-skip "$skip" --launch-count 1 \
    "${sec[@]}" --import-source no -f -o "/tmp/$name" \
    ".carry/var/$v/metrale" bench --backend cuda --core --prefill 16384 --samples 1 --warmup 0 > "$O/ncu_$name.txt" 2>&1
  el "$v ncu $name rc=$?"
  run "$v" timeout "$(tl 60)" $ncu -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass \
    > "$O/${name}_source.csv" 2>>"$O/ncu_$name.txt"
  run "$v" timeout "$(tl 30)" $ncu -i "/tmp/$name.ncu-rep" --page details --csv > "$O/${name}_details.csv" 2>>"$O/ncu_$name.txt"
  el "$v ncu $name pages rc=$?"
}
phase3_view() { kernel_view "$1" wh_seg 2 phase3; }
finish() {
  python3 scripts/bench-summary.py "$O"/*.json > "$O/summary.txt"
  cat "$O/summary.txt" >> "$O/log.txt"
  tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && cp "$O/log.txt" "$OUT/log.txt" && rm -rf "$O"
}
vulkan_env() {
  # NVIDIA's Vulkan driver: the loader and validation layer from Debian (not on that machine)
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  # where the device README found them
  icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  [ -e $icd ] && export VK_DRIVER_FILES=$icd
  [ -e $egl ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
  ls -l /usr/local/nvidia/share/vulkan/icd.d /usr/local/nvidia/share/glvnd/egl_vendor.d > $O/vulkan_icd.txt 2>&1
  cat $icd >> $O/vulkan_icd.txt 2>&1
  ldconfig -p | grep -i "vulkan\|GLX_nvidia\|EGL" >> $O/vulkan_icd.txt 2>&1
}
