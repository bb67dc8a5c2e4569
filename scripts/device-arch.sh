#!/usr/bin/env bash
# device-arch.sh: the GPU checks of an engine change (issue 35, "architecture step 3"), in one
# call on the GPU machine; builds nothing (needs a .devbuild/ from pack-device.sh). Run it before
# and after such a change, on the same kind of machine, and compare the summaries:
#  1. device-check.sh: the GPU unit tests, the GPU matrix, the watchdog, repeatable bits and
#     the demo (and on 2+ GPUs its real-size configs);
#  2. the grouped GEMM tests on the CUDA backend (test_grouped_plan --backend=cuda) and the FP8
#     GEMM tests (test_cublaslt_fp8);
#  3. the dp gradient sum and the world's amax on the CUDA backend, 2 and 3 ranks sharing the
#     GPU (test_gradient_buckets --backend=cuda: sums against fp64, no copy to the host);
#  4. the training math and the training parity (device-train.sh's ops, parity and backends).
# Writes $OUT (default /tmp/cgemm-arch): check/, grouped.log, fp8.log, train/ and summary.txt.
# Exit 1 when a step failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-arch}
mkdir -p "$out/check" "$out/train"
. "$root/scripts/device-libs.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
summary=()
# gtest's closing counts, uncoloured.
counts() {
  tr -d '\033' <"$1" | sed 's/\[[0-9;]*m//g' | grep -aE '^\[ +(PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' |
    sed 's/, listed below://' | tr '\n' ' '
}
t0=$SECONDS

echo "== 1. device-check.sh (no real-size configs)"
if OUT=$out/check timeout 330 bash "$root/scripts/device-check.sh" >"$out/check.log" 2>&1; then
  summary+=("PASS  device-check.sh ($((SECONDS - t0)) s)")
else
  status=1
  summary+=("FAIL  device-check.sh ($((SECONDS - t0)) s)")
fi
# device-check.sh prints its own summary last: one line per step.
sed -n '/== device-check summary/,$p' "$out/check.log" | head -n 60

for t in "test_grouped_plan --backend=cuda:grouped" "test_cublaslt_fp8:fp8"; do
  cmd=${t%%:*} name=${t##*:}
  echo "== 2. $cmd"
  # shellcheck disable=SC2086
  if timeout 120 mpirun -np 1 --bind-to none -x LD_LIBRARY_PATH "$bin"/$cmd >"$out/$name.log" 2>&1; then
    summary+=("PASS  $cmd ($(counts "$out/$name.log"))")
  else
    status=1
    summary+=("FAIL  $cmd ($(counts "$out/$name.log"))")
    tail -n 20 "$out/$name.log"
  fi
done

# np 2 and 3 over the copy engines; np 2 again through the host (the dp group's fallback where
# shared GPUs' dp group spans nodes), where copies to the host are expected and counted.
for run in "2:0" "3:0" "2:1"; do
  np=${run%%:*} host=${run##*:}
  name="test_gradient_buckets --backend=cuda np $np$([ "$host" = 1 ] && echo ", dp through the host")"
  echo "== 3. $name"
  if timeout 120 mpirun -np "$np" --oversubscribe --bind-to none -x LD_LIBRARY_PATH \
    -x CGEMM_TEST_DP_THROUGH_HOST="$host" "$bin"/test_gradient_buckets --backend=cuda \
    >"$out/buckets$np-$host.log" 2>&1; then
    summary+=("PASS  $name ($(counts "$out/buckets$np-$host.log"))")
  else
    status=1
    summary+=("FAIL  $name ($(counts "$out/buckets$np-$host.log"))")
    tail -n 30 "$out/buckets$np-$host.log"
  fi
done

echo "== 4. device-train.sh ops,parity,backends"
if STEPS=ops,parity,backends OUT=$out/train timeout 200 bash "$root/scripts/device-train.sh" \
  >"$out/train.log" 2>&1; then
  summary+=("PASS  device-train.sh ops,parity,backends ($(counts "$out/train/ops.log"))")
else
  status=1
  summary+=("FAIL  device-train.sh ops,parity,backends")
fi
grep -E "PASS|FAIL|max|loss" "$out/train.log" | head -n 20

echo
echo "== summary ($((SECONDS - t0)) s)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $status
