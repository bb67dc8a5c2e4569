#!/usr/bin/env bash
# device-graphs.sh: CUDA graphs on the GPU machine, over a .devbuild/ made by pack-device.sh
# (libcgemm.so.0 and the GPU tests); builds nothing. PyTorch must be there for the benchmark.
#  1. tests/mpi/test_capture.cpp on the CUDA backend (CGEMM_TEST_BACKEND=cuda), 1, 2, 4 and 8
#     ranks sharing the GPU: every collective kind and path, aggregate on/off, bf16 and FP8
#     current/delayed, replays against eager calls byte for byte; the refusals;
#  2. test_caller_stream (1 and 2 ranks): the call inside the caller's own capture;
#     test_ce_transport (2 ranks): the copy-engine protocol whose flags return to 0;
#  3. bench/graph_replay_bench.py at 1 and 2 ranks: host and GPU time per call, eager against
#     a replayed graph and against torch.cuda.graph around the eager call;
#  4. cgemm-train --cuda_graph on against off, bit for bit (tests/mpi/check_train.sh graph on
#     the CUDA backend: fp32 and bf16, 1 rank, tp 2, dp 2 x tp 2, ranks sharing the GPU);
#  5. the training pass's speed with and without graphs, cgemm against PyTorch eager and
#     torch.cuda.graph (device-train.sh's speed and graph steps, CASES as there);
#  6. tests/gpu/test_torch_graph.py at 1 and 2 ranks: cgemm's PyTorch modules, forward and
#     backward, inside torch.cuda.graph, replays against eager passes byte for byte;
#  7. the grouped GEMM (device-grouped.sh, its logs in $OUT/grouped): every path against fp64
#     references, the device tiles (sizes read on the device: capturable) among them, and the
#     MoE bench with the device tiles eager and replayed from a graph.
# STEPS (default tests,bench,train,speed,torch,grouped; capture: step 1 alone) picks; NPS
# (default 1 2 4 8) the test_capture sizes (its grouped case replays with sizes that change
# between replays).
# Logs and the benchmark's JSON in $OUT (else /tmp/cgemm-device-graphs), a summary at the end;
# exit 1 when anything failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/cgemm-device-graphs}
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
. "$root/scripts/device-steps.sh"
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export CGEMM_LIBRARY=$libs/libcgemm.so.0 PYTHONPATH=$root/python
bin=$root/.devbuild/bin
mpi="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CGEMM_LIBRARY -x PYTHONPATH"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
steps=,${STEPS:-tests,bench,train,speed,torch,grouped},
wants() { [[ $steps == *,$1,* ]]; }
if wants tests || wants capture; then
  for np in ${NPS:-1 2 4 8}; do
    step "test_capture_np$np" $mpi -x CGEMM_TEST_BACKEND=cuda -np $np "$bin/test_capture" \
      --gtest_brief=1
  done
fi
if wants tests; then
  for np in 1 2; do
    step "test_caller_stream_np$np" $mpi -np $np "$bin/test_caller_stream" --gtest_brief=1
  done
  step test_ce_transport_np2 $mpi -np 2 "$bin/test_ce_transport"
fi
if wants bench; then
  for np in 1 2; do
    step "graph_replay_bench_np$np" $mpi -np $np python3 "$root/bench/graph_replay_bench.py" \
      --json "$out/graph_replay_bench_np$np.json"
  done
fi
if wants train; then
  step train_graph env CGEMM_TRAIN_BACKEND=cuda bash "$root/tests/mpi/check_train.sh" graph \
    "$out/train_graph" mpirun -np "$bin/cgemm-train"
fi
if wants speed; then
  step_timeout=500 step train_speed env STEPS=speed,graph OUT="$out/train" \
    bash "$root/scripts/device-train.sh"
fi
if wants torch; then
  for np in 1 2; do
    step "test_torch_graph_np$np" $mpi -np $np python3 "$root/tests/gpu/test_torch_graph.py"
  done
fi
if wants grouped; then
  step_timeout=420 step grouped env OUT="$out/grouped" bash "$root/scripts/device-grouped.sh"
fi
finish
