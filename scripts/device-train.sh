#!/usr/bin/env bash
# device-train.sh: cgemm-train on the GPU machine (issue 24 items 4 and 5), one call. Builds
# nothing (needs a .devbuild/ from pack-device.sh). Steps (STEPS, default ops,parity,backends,
# speed):
#   ops       test_train_ops: TrainOps' kernels against fp64 (CPU and CUDA cases);
#   parity    tests/mpi/check_train.sh parity with CGEMM_TRAIN_BACKEND=cuda: 1 rank against tp 2
#             and dp 2 x tp 2, ranks sharing the GPU (the loss curves, fp32 1e-5, bf16 1e-2);
#   backends  tests/mpi/check_train.sh backends: the CUDA backend's 1-rank loss curve against
#             the CPU backend's;
#   speed     cgemm-train --timed_passes 20 (bf16, no biases, tp 1) and the PyTorch peer
#             bench/peers/torch_train_mlp.py on the same cases (CASES, default
#             demo,standard,llama70b), then $OUT/train_speed.md (scripts/train_speed_table.py);
#   graph     (with speed) the same with CUDA graphs: cgemm-train --cuda_graph on and the peer's
#             --graph (torch.cuda.graph), a second table in train_speed.md.
# Writes to $OUT: ops.log, parity/, backends/, speed/ (the reports, logs, torch's CSV and the
# table). Exit status 1 when a step fails.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-train}
cases=${CASES:-demo,standard,llama70b}
mkdir -p "$out/speed"
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
status=0
steps=,${STEPS:-ops,parity,backends,speed},
wants() { [[ $steps == *,$1,* ]]; }
if wants ops; then
  echo "== test_train_ops (TrainOps against fp64, CPU and CUDA)"
  timeout 120 mpirun -np 1 --bind-to none "$bin/test_train_ops" >"$out/ops.log" 2>&1 || status=1
  grep -E "PASSED|FAILED|SKIPPED \]|Failure" "$out/ops.log" | head -20
fi
for mode in parity backends; do
  wants $mode || continue
  echo "== check_train.sh $mode on the CUDA backend"
  CGEMM_TRAIN_BACKEND=cuda timeout 240 bash "$root/tests/mpi/check_train.sh" $mode "$out/$mode" \
    mpirun -np "$bin/cgemm-train" || status=1
done
if wants speed; then
  echo "== cgemm-train --timed_passes 20, bf16, tp 1 ($cases)"
  declare -A shape=([demo]="2 2048 768 3072" [standard]="4 8192 4096 8192"
    [llama70b]="1 8192 8192 28672")
  for c in ${cases//,/ }; do
    read -r b s h f <<<"${shape[$c]}"
    timeout 120 mpirun -np 1 --bind-to none "$bin/cgemm-train" --backend cuda --dtype bf16 \
      --bias off --batch "$b" --seq_len "$s" --hidden "$h" --ffn "$f" --steps 3 --lr 1e-4 \
      --timed_passes 20 --report "$out/speed/cgemm_$c.json" >"$out/speed/cgemm_$c.log" 2>&1 ||
      { status=1; tail -n 5 "$out/speed/cgemm_$c.log"; }
    grep -E "forward \+ backward pass|error" "$out/speed/cgemm_$c.log"
  done
  echo "== PyTorch eager (bench/peers/torch_train_mlp.py)"
  timeout 180 python3 "$root/bench/peers/torch_train_mlp.py" --out "$out/speed" --cases "$cases" ||
    status=1
  if wants graph; then
    echo "== with CUDA graphs: cgemm-train --cuda_graph on, torch_train_mlp.py --graph ($cases)"
    for c in ${cases//,/ }; do
      read -r b s h f <<<"${shape[$c]}"
      timeout 120 mpirun -np 1 --bind-to none "$bin/cgemm-train" --backend cuda --dtype bf16 \
        --bias off --batch "$b" --seq_len "$s" --hidden "$h" --ffn "$f" --steps 3 --lr 1e-4 \
        --timed_passes 20 --cuda_graph on --report "$out/speed/cgemm_${c}_graph.json" \
        >"$out/speed/cgemm_${c}_graph.log" 2>&1 ||
        { status=1; tail -n 5 "$out/speed/cgemm_${c}_graph.log"; }
      grep -E "forward \+ backward pass|error" "$out/speed/cgemm_${c}_graph.log"
    done
    timeout 180 python3 "$root/bench/peers/torch_train_mlp.py" --out "$out/speed" --cases "$cases" \
      --graph || status=1
  fi
  python3 "$root/scripts/train_speed_table.py" "$out/speed" >"$out/train_speed.md" || status=1
  cat "$out/train_speed.md"
fi
# The device tool brings back a limited number of files: one archive of them all.
tar -czf "$out/train.tgz" -C "$out" --exclude train.tgz . 2>/dev/null || true
exit $status
