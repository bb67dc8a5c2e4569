#!/usr/bin/env bash
# build.sh [BUILD_DIR] [extra cmake args...]: configures and builds cgemm (Release-ish,
# Ninja). The CUDA backend is built when the CUDA toolkit is found. Installs the build
# dependencies first (install-deps.sh, as demo.sh does), so it works on a fresh machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
build=${1:-$root/build}
shift || true
# The CUDA toolkit is not on PATH by default on Debian-style installs.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build "$build" -j"$(nproc)"
