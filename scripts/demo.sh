#!/bin/bash
# Installs the dependencies, builds metrale and runs `metrale demo` on the best available
# backend (cuda > hip > vulkan > cpu; the CPU one when there is no GPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMETRALE_TESTS=OFF
cmake --build "$root/build"
"$root/build/bin/metrale" demo "$@"
