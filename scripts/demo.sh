#!/usr/bin/env bash
# demo.sh: installs what cgemm needs, builds what the main job runs (cgemm-run and the
# library; no tests), and runs that job on the demo config (GPT-2 small's MLP block:
# all-gather up projection, reduce-scatter down projection) on 4 ranks, dp 2 x tp 2. On a
# machine with GPUs it runs on them (backend auto); without, on the CPU backend. Extra
# arguments go to cgemm-run (e.g. --report report.json).
#
# A fresh build/ on a machine without a GPU is configured without the CUDA backend: the job
# could not use it, and its kernels are most of a cold build's time. scripts/test.sh turns it
# back on (where the toolkit is found), and an existing build/ is reused as it is configured.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
"$root/scripts/install-deps.sh"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
# A GPU is "present" when the driver lists one; the toolkit alone (a build host) is not enough.
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  have_gpu=1
fi
configure=()
if [ ! -f "$build/CMakeCache.txt" ]; then
  configure=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  if [ "$have_gpu" = 0 ]; then
    configure+=(-DCGEMM_WITH_CUDA=OFF)
    echo "demo: no GPU here: building the CPU backend only"
  fi
fi
mkdir -p "$build"
log=$build/demo-build.log
echo "demo: building cgemm-run and the library into build/ (log: build/demo-build.log)"
start=$SECONDS
# Ninja's [done/total] lines are the progress, shown as each step ends (grep --line-buffered,
# also into a pipe or file); the full compiler output stays in the log.
if ! { cmake -S "$root" -B "$build" "${configure[@]}" >"$log" 2>&1 &&
  cmake --build "$build" -j"$(nproc)" --target cgemm-run 2>&1 | tee -a "$log" |
  { grep --line-buffered -E '^\[[0-9]+/[0-9]+\]' || true; }; }; then
  tail -n 40 "$log"
  echo "demo: the build failed; the whole log is build/demo-build.log" >&2
  exit 1
fi
echo "demo: built in $((SECONDS - start)) s"
# Root may run MPI here (containers, CI); more ranks than cores are allowed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
exec mpirun -np 4 -x NCCL_NVLS_ENABLE "$build/bin/cgemm-run" --config "$root/configs/demo.ini" "$@"
