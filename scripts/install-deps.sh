#!/bin/bash
# Installs what building and testing metrale needs on Debian 12 (idempotent).
# CUDA is not a Debian package: the CUDA module is built when nvcc is found
# (on PATH or in /usr/local/cuda), and skipped otherwise.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config   # toolchain
  libjansson-dev                                 # JSON (config.json, safetensors headers)
  libcriterion-dev                               # tests
  glslang-tools libvulkan-dev spirv-tools        # Vulkan backend: shader compiler, headers
  mesa-vulkan-drivers vulkan-validationlayers    # lavapipe (Vulkan on the CPU) + validation
)
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$root/backends/hip/CMakeLists.txt" ]; then
  packages+=(hipcc)                              # HIP backend: builds AMD code objects
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
