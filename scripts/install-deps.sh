#!/usr/bin/env bash
# Installs cgemm's build and test dependencies from Debian packages (idempotent).
# Needs root or sudo. The CUDA toolkit is not installed here: when present (default
# prefix /usr/local/cuda) the CUDA backend is built too, otherwise it is skipped.
# `install-deps.sh --test` also installs test_packages: what only the test suite needs
# (scripts/test.sh passes it); plain `install-deps.sh` installs the base packages only.
set -euo pipefail
with_tests=0
[ "${1:-}" = "--test" ] && with_tests=1
packages=(
  build-essential cmake ninja-build pkg-config
  libopenmpi-dev openmpi-bin libucx-dev
  libboost-program-options-dev nlohmann-json3-dev
  libopenblas-dev libgtest-dev
  python3 iproute2 util-linux
)
# Test-only packages. Slurm (tests/slurm): controller, node daemon, clients, munge (a hard
# dependency) and libpmix-dev (Slurm's PMIx plugin loads a library only it ships). clang and
# its libFuzzer/sanitizer runtimes (tests/fuzz/run_fuzz.sh): clang only recommends
# libclang-rt-14-dev (Debian 12), hence named. python3-numpy: the Python module's test
# (tests/mpi/test_python_capi.py) and examples/python_gemm.py. python3-venv: the virtual
# environment of the pinned PyPI packages (scripts/python-venv.sh: jax for tests/jax/).
test_packages=(
  slurmctld slurmd slurm-client munge libpmix-dev
  clang libclang-rt-14-dev
  python3-numpy python3-venv
)
[ "$with_tests" = 1 ] && packages+=("${test_packages[@]}")
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
# Package scripts must not start services (slurmctld, slurmd, munge) on this machine: a
# policy-rc.d that says no, unless the machine has one already.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# install-deps.sh: no service starts during package installation\nexit 101\n' |
    $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
