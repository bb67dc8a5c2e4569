#!/usr/bin/env bash
# device-ucx.sh: issue 27's CUDA part in one call on the GPU machine (2 ranks sharing one GPU,
# about 2 minutes). Builds nothing (needs a .devbuild/ from pack-device.sh):
#  1. cgemm-ucx-info --no_transports: what the machine's UCX offers (memory types, ordering);
#  2. the same bits: transport ce against transport ucx (device buffers staged through pinned
#     host memory), both collectives, aggregate on and off, chunks_per_rank 1 and 2
#     (tests/mpi/transport_bits.sh with BACKEND=cuda);
#  3. the watchdog over the staged UCX transport: a stopped peer is named within the deadline;
#  4. the time of the overlapped and sequential paths with each transport on one all-gather and
#     one reduce-scatter GEMM (two ranks share the GPU, so the times show the staging's cost
#     against the copy engines, not a speed-up);
#  5. tests/gpu/gpu_matrix.sh in mode ucx on a covering subset of its cases (MATRIX_FILTER),
#     every output against the CPU backend's.
# Writes $OUT (default /tmp/cgemm-ucx): one log per step and summary.txt. Exit 1 when a step
# failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-ucx}
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
export CGEMM_GEMM_AUTOTUNE=1
mpi="mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x CGEMM_GEMM_AUTOTUNE"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader | head -1
status=0
summary=()
step() {
  local name=$1 t0=$SECONDS
  shift
  if "$@" >"$out/$name.log" 2>&1; then
    summary+=("PASS  $name ($((SECONDS - t0)) s)")
  else
    status=1
    summary+=("FAIL  $name (exit $?, $((SECONDS - t0)) s; $out/$name.log)")
  fi
  tail -n 12 "$out/$name.log"
}

echo "== 1. cgemm-ucx-info"
step ucx_info "$bin/cgemm-ucx-info" --no_transports

echo "== 2. the same bits over the copy engines and over UCX"
# Both runs pick the heuristic's first GEMM algorithm, so only the transport differs.
step same_bits timeout 200 env RUN_TIMEOUT=25 CGEMM_GEMM_AUTOTUNE=0 BACKEND=cuda TRANSPORTS="ce ucx" \
  bash "$root/tests/mpi/transport_bits.sh" 2 "$mpi" "$bin/cgemm-run" --gpu_sharing on

echo "== 3. the watchdog over UCX"
step watchdog_stop timeout 40 env CGEMM_GEMM_AUTOTUNE=1 \
  CGEMM_FAULT_WAIT="(exchange '[^']*' over UCX \(group [0-9]+\): (ready flag|data) from world rank [0-9]+ \(host [^)]+\), tp rank [0-9]+|UCX exchange group [0-9]+ \('[^']*'\): this GPU's copy of its chunks to the host)" \
  bash "$root/tests/mpi/fault_check.sh" 5 stop:1:5 $mpi -np 2 "$bin/cgemm-run" --backend cuda \
  --gpu_sharing on --transport ucx --collective all_gather --seq_len 256 --hidden_in 256 \
  --hidden_out 256 --timeout 5 --iterations 50

echo "== 4. times, transport ce and ucx"
printf 'gemm = up all_gather 4096 4096\ngemm = down reduce_scatter 4096 4096\n' >"$out/time.ini"
for t in ce ucx; do
  step "time_$t" timeout 60 $mpi -np 2 "$bin/cgemm-run" --backend cuda --gpu_sharing on --transport $t \
    --config "$out/time.ini" --batch 2 --seq_len 4096 --warmup 5 --iterations 20
  grep -E "overlapped .* \| sequential" "$out/time_$t.log"
done

echo "== 5. the GPU matrix over UCX (a covering subset: tp 2, 4, 8, dp 2 x tp 2, FP8 current"
echo "   scaling), every output against the CPU backend's"
step matrix_ucx timeout 240 env MATRIX_FILTER="${MATRIX_FILTER:-^(tp2_bf16_bias_bfirst_agg0_s3|tp4_fp16_bias_sfirst_agg0_s1|tp8_fp32_nobias_sfirst_agg1_s2|dp2tp2_bf16_bias_bfirst_c2_agg0_s2|tp2_fp8current_bias_bfirst_agg0_s3|tp2_fp16_nobias_sfirst_c4_agg1_s2)$}" \
  bash "$root/tests/gpu/gpu_matrix.sh" "$bin" ucx "$out/matrix"

echo
echo "== device-ucx summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $status
