#!/bin/bash
# Installs the dependencies and runs every test: a Release build with every backend that
# can be built here (a backend without its device skips, saying why), then the CPU tests
# again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/scripts/install-deps.sh"

cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$root/build" -j "$jobs"
METRALE_VULKAN_VALIDATION=1 ctest --test-dir "$root/build" --output-on-failure -j "$jobs"

cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DMETRALE_SANITIZE=address,undefined -DMETRALE_CUDA=OFF -DMETRALE_HIP=OFF -DMETRALE_VULKAN=OFF
cmake --build "$root/build-asan" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$root/build-asan" --output-on-failure -j "$jobs" -L cpu
