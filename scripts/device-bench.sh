#!/usr/bin/env bash
# device-bench.sh: the speed run on the GPU machine, one call: the PyTorch peers
# (bench/peers/torch_async_tp.py under torchrun), then cgemm-bench over the whole sweep,
# joined with the peers, plus a timeline of the standard shape. Builds nothing (needs a
# .devbuild/ from pack-device.sh). Writes torch_peers.csv, cgemm_bench.{csv,json,md} and
# bench_trace.json(.svg) to $OUT; docs/PERFORMANCE.md takes cgemm_bench.md as it is.
# Extra arguments go to cgemm-bench (e.g. --cases standard --knobs off).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-bench}
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
gpus=$(nvidia-smi -L | grep -c "^GPU")
async=""
[ "$gpus" -lt 2 ] && async="--no-async"
echo "== PyTorch peers on $gpus GPU(s)"
timeout 420 torchrun --nproc_per_node "$gpus" "$root/bench/peers/torch_async_tp.py" --out "$out" $async \
  2>&1 | grep -v "^W1" | tail -n 40
peers=""
[ -f "$out/torch_peers.csv" ] && peers="--peers $out/torch_peers.csv"
echo "== cgemm-bench on $gpus GPU(s)"
mpirun -np "$gpus" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH "$bin/cgemm-bench" \
  --out "$out" $peers --trace "$out/bench_trace.json" "$@"
