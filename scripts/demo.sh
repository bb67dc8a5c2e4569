#!/usr/bin/env bash
# demo.sh: installs what cgemm needs, builds it, and runs the main job on the demo config
# (GPT-2 small's MLP block: all-gather up projection, reduce-scatter down projection) on
# 4 ranks, dp 2 x tp 2. On a machine with GPUs it runs on them (backend auto); without,
# on the CPU backend. Extra arguments go to cgemm-run (e.g. --report report.json).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
echo "demo: building cgemm into build/ (the first build takes a few minutes; log: build/demo-build.log)"
mkdir -p "$root/build"
if ! "$root/scripts/build.sh" "$root/build" >"$root/build/demo-build.log" 2>&1; then
  tail -n 40 "$root/build/demo-build.log"
  echo "demo: the build failed; the whole log is build/demo-build.log" >&2
  exit 1
fi
# Root may run MPI here (containers, CI); more ranks than cores are allowed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
exec mpirun -np 4 -x NCCL_NVLS_ENABLE "$root/build/bin/cgemm-run" --config "$root/configs/demo.ini" "$@"
