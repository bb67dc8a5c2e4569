#!/usr/bin/env bash
# Installs cgemm's build and test dependencies from Debian packages (idempotent).
# Needs root or sudo. The CUDA toolkit is not installed here: when present (default
# prefix /usr/local/cuda) the CUDA backend is built too, otherwise it is skipped.
# --test: also the packages only the test suite needs (scripts/test.sh passes it).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin libucx-dev
  libboost-program-options-dev nlohmann-json3-dev
  libopenblas-dev libgtest-dev
  python3 iproute2 util-linux
)
# Test-only packages. clang and its libFuzzer/sanitizer runtimes (tests/fuzz/run_fuzz.sh);
# clang only recommends libclang-rt-14-dev (Debian 12), hence named.
test_packages=(clang libclang-rt-14-dev)
[ "${1:-}" = "--test" ] && packages+=("${test_packages[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
