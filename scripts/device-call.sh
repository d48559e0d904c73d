# Sourced by a device call's run.sh (docs/bench/<gpu>-<date>-<topic>/callN/run.sh), from the
# repository root on the device machine, after it sets CALL (the call's name, e.g. c3):
#   run V CMD...        CMD with build V's libraries and backends (.carry/var/V) first
#   B V ARGS...         `metrale bench --backend cuda ARGS` of build V (200 s at most)
#   el WHAT             a line "[seconds since the start] WHAT" in the call's log
#   tl S                S, or what is left of BUDGET s (560 unless set) if less: a step's timeout,
#                       so that finish always runs inside one `run`'s 10 minutes
#   finish              the JSON summaries into the log, the call's folder packed as $OUT/$CALL.tgz
# The builds are carried in .carry/var/<V>/ (metrale, the test binaries, libmetrale*.so and the
# backend modules); .carry/lib holds the test binaries' shared libraries (Criterion's).
O=$OUT/$CALL
mkdir -p "$O"
T0=$(date +%s)
date -u > "$O/log.txt"
el() { echo "[$(($(date +%s) - T0))s] $*" >> "$O/log.txt"; }
tl() {
  local left=$((${BUDGET:-560} - ($(date +%s) - T0)))
  [ $left -lt 5 ] && left=5
  [ "$1" -lt $left ] && echo "$1" || echo $left
}
run() {
  local v=$1
  shift
  METRALE_BACKEND_PATH=$PWD/.carry/var/$v LD_LIBRARY_PATH=$PWD/.carry/lib:$PWD/.carry/var/$v "$@"
}
B() { run "$1" timeout 200 ".carry/var/$1/metrale" bench --backend cuda "${@:2}"; }
finish() {
  python3 scripts/bench-summary.py "$O"/*.json > "$O/summary.txt"
  cat "$O/summary.txt" >> "$O/log.txt"
  tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && cp "$O/log.txt" "$OUT/log.txt" && rm -rf "$O"
}
