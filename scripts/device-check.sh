#!/usr/bin/env bash
# device-check.sh: runs on the GPU machine over a .devbuild/ made by pack-device.sh; builds
# nothing. In one call of a few minutes, on any number of GPUs (one is enough):
#  1. the GPU unit tests: cuBLASLt GEMMs; the CUDA backend one rank per GPU, and 2 and 4 ranks
#     sharing the GPUs (no NCCL); the copy-engine protocol on 2 ranks; execution on a caller's
#     stream and a borrowed NCCL communicator (1 and 2 ranks);
#  2. the GPU matrix with ranks sharing the GPUs (tp 2, 4, 8, dp 2 x tp 2; every schedule,
#     checked against the sequential path and against the CPU backend), and on 2+ GPUs the
#     same over NVLink on both transports (copy engine, NCCL), one rank per GPU;
#  3. the watchdog: a peer stopped or skipping its exchange ends the job in time, with a line;
#  4. repeatable bits: a job twice gives the same output checksums on every rank;
#  5. the Quick-start demo (4 ranks, sharing where GPUs are fewer), and on 2+ GPUs the
#     real-size configs on both transports;
# then a summary, one line per step. Logs stay in /tmp/cgemm-device; the summary and the
# matrix logs go to $OUT when it is set. Exit 1 when anything failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=/tmp/cgemm-device
reports=${OUT:-$out}
mkdir -p "$out" "$reports"
. "$root/scripts/device-libs.sh"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
status=0
summary=()
note() { summary+=("$1"); }
gpus=$(nvidia-smi -L | grep -c "^GPU")
mpi="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH"

# step NAME COMMAND...: runs it with its log in $out/NAME.log; PASS/FAIL with the log's last
# line that says passed (gtest) or PASSED (cgemm-run).
step() {
  local name=$1
  shift
  local t0=$SECONDS
  if "$@" >"$out/$name.log" 2>&1; then
    note "PASS  $name ($((SECONDS - t0)) s; $(grep -E 'PASSED|passed' "$out/$name.log" | tail -1 | tr -d '\033' | sed 's/\[0;32m//;s/\[m//'))"
  else
    status=1
    note "FAIL  $name ($((SECONDS - t0)) s)"
    tail -n 30 "$out/$name.log"
  fi
}

if [ "${SKIP_UNIT:-0}" != 1 ]; then
  step test_cublaslt_gemm "$bin/test_cublaslt_gemm" --gtest_brief=1
  step test_cublaslt_fp8 "$bin/test_cublaslt_fp8" --gtest_brief=1
  for np in 1 2; do
    step "test_cuda_quantize_np$np" $mpi -x CGEMM_TEST_GPU_SHARING=1 -np $np \
      "$bin/test_cuda_quantize" --gtest_brief=1
  done
  step test_cuda_backend $mpi -np "$gpus" "$bin/test_cuda_backend" --gtest_brief=1
  for np in 2 4; do
    step "test_cuda_backend_shared_np$np" $mpi -x CGEMM_TEST_GPU_SHARING=1 -np $np \
      "$bin/test_cuda_backend" --gtest_brief=1
  done
  step test_ce_transport $mpi -np 2 "$bin/test_ce_transport"
  # The caller's stream: 1 rank (with the borrowed NCCL communicator), and 2 ranks sharing the
  # GPUs where they are fewer (the NCCL cases skip then, saying why).
  step test_caller_stream_np1 $mpi -np 1 "$bin/test_caller_stream" --gtest_brief=1
  step test_caller_stream_np2 $mpi -np 2 "$bin/test_caller_stream" --gtest_brief=1
fi

if [ "${SKIP_MATRIX:-0}" != 1 ]; then
  modes=(shared)
  [ "$gpus" -ge 2 ] && modes+=(ce nccl)
  for mode in "${modes[@]}"; do
    t0=$SECONDS
    if bash "$root/tests/gpu/gpu_matrix.sh" "$bin" "$mode" "$out/matrix" >"$reports/matrix_$mode.log" 2>&1; then
      note "PASS  $(tail -n 1 "$reports/matrix_$mode.log") ($((SECONDS - t0)) s)"
    else
      status=1
      note "FAIL  $(tail -n 1 "$reports/matrix_$mode.log") ($((SECONDS - t0)) s)"
    fi
    grep -E "^  [a-z0-9]+: " "$reports/matrix_$mode.log" | while read -r l; do echo "      $l"; done >>"$out/groups.txt"
    grep -E "^FAIL" -A12 "$reports/matrix_$mode.log" | head -n 60
  done
fi

if [ "${SKIP_WATCHDOG:-0}" != 1 ]; then
  # A stalled peer on the CUDA backend: 2 ranks sharing the GPUs (copy engines), and on 2+ GPUs
  # one rank per GPU over NCCL; each must end within the timeout + 10 s with the watchdog's line.
  small=(--seq_len 256 --hidden_in 256 --hidden_out 256 --timeout 5 --iterations 50)
  for fault in stop:1:5 skip_exchange:1:3; do
    for coll in all_gather reduce_scatter; do
      step "watchdog_shared_${fault%%:*}_$coll" bash "$root/tests/mpi/fault_check.sh" 5 "$fault" \
        $mpi -np 2 "$bin/cgemm-run" --backend cuda --gpu_sharing on --collective $coll "${small[@]}"
      if [ "$gpus" -ge 2 ]; then
        step "watchdog_nccl_${fault%%:*}_$coll" bash "$root/tests/mpi/fault_check.sh" 5 "$fault" \
          $mpi -np 2 "$bin/cgemm-run" --backend cuda --use_ce off --collective $coll "${small[@]}"
      fi
    done
  done
fi

if [ "${SKIP_REPEAT:-0}" != 1 ]; then
  # Repeatable bits on the copy-engine transport: the same job twice, the same checksum of every
  # output shard; with cuBLASLt's algorithm chosen by timing (default) and by the heuristic.
  for tune in 1 0; do
    step "repeatable_bits_shared_autotune$tune" env CGEMM_GEMM_AUTOTUNE=$tune \
      bash "$root/tests/mpi/repeat_check.sh" "$out/repeat$tune" $mpi -x CGEMM_GEMM_AUTOTUNE -np 4 \
      "$bin/cgemm-run" --backend cuda --gpu_sharing on --config "$root/configs/demo.ini" \
      --warmup 0 --iterations 1 --check_rounds 2
  done
fi

if [ "${SKIP_CONFIGS:-0}" != 1 ]; then
  step demo $mpi -np 4 "$bin/cgemm-run" --config "$root/configs/demo.ini" \
    --report "$reports/demo.json"
  grep -E "backend|gpu_sharing|check|shared" "$out/demo.log" | head -n 12
  if [ "$gpus" -ge 2 ]; then
    for cfg in te_bf16_all_gather te_bf16_reduce_scatter; do
      for ce in on off; do
        step "${cfg}_ce_${ce}" $mpi -np "$gpus" "$bin/cgemm-run" --config "$root/configs/$cfg.ini" \
          --backend cuda --use_ce $ce --report "$reports/${cfg}_ce_${ce}.json"
      done
    done
  fi
fi

echo
echo "== device-check summary ($gpus GPU(s))"
printf '%s\n' "${summary[@]}" | tee "$reports/summary.txt"
[ -f "$out/groups.txt" ] && cat "$out/groups.txt" | tee -a "$reports/summary.txt"
exit $status
