#!/usr/bin/env bash
# device-check.sh: runs on the GPU machine over a .devbuild/ made by pack-device.sh; builds
# nothing. GPU unit tests, the 2-GPU collective matrix, then the real-size configs with
# both transports; a short table last. Reports land in $OUT when it is set.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
# Logs stay on the machine; only the JSON reports and the matrix log go to $OUT (the
# device tool brings back at most 8 files).
out=/tmp/cgemm-device
reports=${OUT:-$out}
mkdir -p "$out" "$reports"
export LD_LIBRARY_PATH=$root/.devbuild/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
status=0
summary=()
note() { summary+=("$1"); }

gpus=$(nvidia-smi -L | grep -c "^GPU")
mpi="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH"
if [ "${SKIP_UNIT:-0}" != 1 ]; then
  # name|command: the cuBLASLt tests in one process, the backend tests one rank per GPU,
  # the copy-engine protocol on 2 ranks (they may share a GPU).
  for entry in "test_cublaslt_gemm|$bin/test_cublaslt_gemm --gtest_brief=1" \
    "test_cuda_backend|$mpi -np $gpus $bin/test_cuda_backend --gtest_brief=1" \
    "test_ce_transport|$mpi -np 2 $bin/test_ce_transport"; do
    name=${entry%%|*}
    if ${entry#*|} >"$out/$name.log" 2>&1; then
      note "PASS  $name ($(grep -E 'PASSED|passed' "$out/$name.log" | tail -1 | tr -d '\033' | sed 's/\[0;32m//;s/\[m//'))"
    else
      status=1
      note "FAIL  $name"
      tail -n 30 "$out/$name.log"
    fi
  done
fi

if [ "${SKIP_MATRIX:-0}" != 1 ] && [ "$gpus" -ge 2 ]; then
  if bash "$root/tests/gpu/collective_matrix.sh" "$bin" | tee "$reports/matrix.log"; then
    note "PASS  $(tail -n 1 "$reports/matrix.log")"
  else
    status=1
    note "FAIL  $(tail -n 1 "$reports/matrix.log")"
  fi
fi

if [ "${SKIP_CONFIGS:-0}" != 1 ]; then
  for cfg in te_bf16_all_gather te_bf16_reduce_scatter; do
    for ce in on off; do
      name=${cfg}_ce_${ce}
      if $mpi -np "$gpus" "$bin/cgemm-run" \
        --config "$root/configs/$cfg.ini" --backend cuda --use_ce $ce \
        --report "$reports/$name.json" >"$out/$name.log" 2>&1; then
        note "PASS  $name: $(grep -E 'overlapped .* ms' "$out/$name.log" | sed 's/.*] //')"
      else
        status=1
        note "FAIL  $name"
        tail -n 30 "$out/$name.log"
      fi
    done
  done
  cat "$out/te_bf16_all_gather_ce_on.log" 2>/dev/null | head -n 20
fi

echo
echo "== device-check summary"
printf '%s\n' "${summary[@]}"
exit $status
