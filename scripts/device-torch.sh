#!/usr/bin/env bash
# device-torch.sh: the plugin boundary on the GPU machine, over a .devbuild/ made by
# pack-device.sh (libcgemm.so.0 and test_caller_stream); builds nothing. PyTorch must be there.
#  1. tests/gpu/test_torch_op.py on 1 rank and on 2 (sharing the GPU where there is one:
#     Context(gpu_sharing=True)), its reference gathered over gloo; its overhead lines;
#  2. examples/torch_gemm.py on 2 ranks;
#  3. on 4+ GPUs, test_caller_stream's borrowed-communicator cases on 4 ranks (tp 2 x dp 2: the
#     membership check; NCCL refuses ranks sharing a GPU, so fewer GPUs skip it, said so);
#  4. training: tests/torch/test_torch_training.py (autograd, modules, torch.compile) on 1, 2
#     and 3 ranks; examples/torch_mlp_train.py (AdamW, 50 steps against plain PyTorch) at tp 2
#     and 3 in float32 and at tp 2 in bfloat16; bench/torch_train_bench.py (tp 1: the block's
#     training step against plain PyTorch, the host time per op call).
# Logs in $OUT (else /tmp/cgemm-device-torch), a summary at the end; exit 1 when anything failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/cgemm-device-torch}
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export CGEMM_LIBRARY=$libs/libcgemm.so.0 PYTHONPATH=$root/python
gpus=$(nvidia-smi -L | grep -c "^GPU")
# gloo's rendezvous port is given, not derived from the launcher's pid (test_torch_op.py).
mpi="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CGEMM_LIBRARY -x PYTHONPATH -x MASTER_PORT"
status=0
summary=()
step() {
  local name=$1
  shift
  local t0=$SECONDS
  if timeout 300 "$@" >"$out/$name.log" 2>&1; then
    summary+=("PASS  $name ($((SECONDS - t0)) s; $(grep -E '^PASS|skipped|passed|PASSED|checks|ratio|max \|y' "$out/$name.log" | tail -1))")
  else
    status=1
    summary+=("FAIL  $name ($((SECONDS - t0)) s; $out/$name.log)")
  fi
  tail -n 20 "$out/$name.log"
}
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
# One seed for every rank (the test's default, the clock, may differ between ranks' starts).
seed=$(date +%s)
for np in 1 2; do
  export MASTER_PORT=$((29400 + np))
  step "test_torch_op_np$np" $mpi -np $np python3 "$root/tests/gpu/test_torch_op.py" --seed "$seed"
done
export MASTER_PORT=29410
step torch_gemm_example_np2 $mpi -np 2 python3 "$root/examples/torch_gemm.py"
if [ "$gpus" -ge 4 ]; then
  step test_caller_stream_np4 $mpi -np 4 "$root/.devbuild/bin/test_caller_stream" \
    --gtest_filter='BorrowedNccl.*' --gtest_brief=1
else
  summary+=("SKIP  test_caller_stream_np4 (the membership check needs 4 GPUs, $gpus here)")
fi
for np in 1 2 3; do
  export MASTER_PORT=$((29420 + np))
  step "test_torch_training_np$np" $mpi -np $np python3 "$root/tests/torch/test_torch_training.py" \
    "$seed" --device cuda
done
for run in "2 float32" "3 float32" "2 bfloat16"; do
  read -r np dtype <<<"$run"
  export MASTER_PORT=$((29430 + np))
  step "torch_mlp_train_np${np}_$dtype" $mpi -np $np python3 "$root/examples/torch_mlp_train.py" \
    --device cuda --dtype "$dtype" --steps 50
done
step torch_train_bench python3 "$root/bench/torch_train_bench.py"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $status
