#!/bin/bash
# Builds, on this machine, what a device call carries (DEVELOPERS.md, "The GPU machine").
#
#   scripts/device-prepare.sh NAME [PATCH...]
#       HEAD's tree (committed files only), each PATCH applied with `git apply`, built in
#       Release with the cuda and vulkan backends into /tmp/metrale-var-NAME; what a call runs
#       is copied into .carry/var/NAME: metrale, metrale_conformance, metrale_layer_tests, the
#       vulkan_* tests, libmetrale.so*, the backend modules.  The tests read this checkout's
#       tests/fixtures.  .carry/lib gets the test programs' shared libraries (Criterion's).
#       With CUBINS=1 set, also the sm_90a cubins into .carry/var/NAME/cubin (3.2 MB), with the
#       variant's kernels.def (sass-pdl-check.py reads the early-start rows of the code it checks).
#   scripts/device-prepare.sh --vulkan-loader
#       Debian's Vulkan loader, Khronos validation layer and glvnd (libEGL, libGLX: the device
#       README lists them; with the loader alone NVIDIA's ICD did not load on 2026-12-05), as
#       packages, into .gl/ (the device machine has none of them; a call unpacks them with
#       scripts/device-call.sh's vulkan_env).
#
# A call then carries [".carry"] (and ".gl") and runs a script that sources
# scripts/device-call.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ "${1:-}" = --vulkan-loader ]; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 vulkan-validationlayers libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  ls -l .gl
  exit 0
fi
[ $# -ge 1 ] || { echo "usage: $0 NAME [PATCH...] | --vulkan-loader" >&2; exit 2; }
name=$1
shift
case "$name" in *[!A-Za-z0-9_-]*|'') echo "$0: NAME in letters, digits, _ and -" >&2; exit 2 ;; esac

src=/tmp/metrale-var-$name
git worktree remove --force "$src" 2>/dev/null || rm -rf "$src"
git worktree prune
rev=$(git rev-parse --short HEAD) # what is built, whatever the checkout moves to meanwhile
git worktree add --force --detach "$src" "$rev" >/dev/null
for p in "$@"; do git -C "$src" apply "$root/$p"; done
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRALE_HIP=OFF \
  -DMETRALE_FIXTURES_DIR="$root/tests/fixtures" > "$src/configure.log"
ninja -C "$src/build" > "$src/build.log" || { tail -20 "$src/build.log"; exit 1; }

out=.carry/var/$name
rm -rf "$out"
mkdir -p "$out"
bin=$src/build/bin
cp -P "$bin"/metrale "$bin"/metrale_conformance "$bin"/metrale_layer_tests "$bin"/libmetrale.so* "$out"/
cp "$bin"/libmetrale-backend-*.so "$out"/
for t in "$bin"/vulkan_*; do [ -x "$t" ] && cp "$t" "$out"/; done
if [ -n "${CUBINS:-}" ]; then # the sm_90a kernels, for cuobjdump -sass there (scripts/sass-pdl-check.py)
  mkdir -p "$out"/cubin
  cp "$src"/build/backends/cuda/kernels/*.sm_90a.cubin "$out"/cubin/
  cp "$src"/core/include/metrale/kernels.def "$out"/cubin/ # its own early-start rows, patched or not
fi
../shared/tools/collect-libs.sh .carry/lib "$out"/metrale_conformance "$out"/metrale_layer_tests >/dev/null
# collect-libs also gathers the build's own library; each build loads the one in its folder
# (scripts/device-call.sh checks), never a shared copy
rm -f .carry/lib/libmetrale.so*
git worktree remove --force "$src"
echo "$rev${*:+ + $*}" > "$out/REVISION" # device-call.sh logs it beside the build
echo "$out: $rev${*:+ + $*}"
ls "$out"
du -sh .carry
