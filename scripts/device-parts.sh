#!/usr/bin/env bash
# device-parts.sh: the one-GPU tables of docs/PERFORMANCE.md, one call on the GPU machine:
# torch.mm on the chunks (bench/peers/torch_chunking.py), then cgemm-bench --parts all joined
# with it, then the chunking study again with the GEMM autotuner timing 32 candidates instead
# of 8 (CGEMM_GEMM_CANDIDATES), to see what a wider search buys. Builds nothing (needs a
# .devbuild/ from pack-device.sh). Writes to $OUT: torch_chunks.csv, cgemm_parts.md,
# cgemm_parts_{chunking,interference,copy_bandwidth}.csv, c32/cgemm_parts.md.
# Extra arguments go to both cgemm-bench runs (e.g. --cases standard --iterations 10).
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-parts}
mkdir -p "$out/c32"
export LD_LIBRARY_PATH=$root/.devbuild/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
tps=1,2,4,8
status=0
echo "== torch.mm on the chunks"
timeout 240 python3 "$root/bench/peers/torch_chunking.py" --out "$out" --tp "$tps" || status=1
torch=""
[ -f "$out/torch_chunks.csv" ] && torch="--torch_chunks $out/torch_chunks.csv"
echo "== cgemm-bench --parts all"
timeout 240 mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH "$bin/cgemm-bench" --parts all \
  --parts_tp "$tps" $torch --out "$out" "$@" || status=1
echo "== cgemm-bench --parts chunking, CGEMM_GEMM_CANDIDATES=32"
CGEMM_GEMM_CANDIDATES=32 timeout 180 mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH \
  -x CGEMM_GEMM_CANDIDATES "$bin/cgemm-bench" --parts chunking --parts_tp "$tps" \
  --parts_chunks_per_rank 1 $torch --out "$out/c32" "$@" || status=1
exit $status
