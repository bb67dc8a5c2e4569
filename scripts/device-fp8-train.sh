#!/usr/bin/env bash
# device-fp8-train.sh: issue 42 (FP8 training) on the GPU machine (one GPU; the device tool's
# 600 s per call: pick STEPS to fit, each step has its own timeout). Builds nothing (needs a
# .devbuild/ from pack-device.sh). Steps (STEPS, default tests,accuracy,speed):
#   tests     test_cuda_quantize (the FP8 codes' transpose among the quantize kernels), and
#             test_prequantized on the CUDA backend at 1 and 2 ranks sharing the GPU (pre-quantized
#             operands and QuantizedTensor against the GEMM that quantizes itself), and
#             test_all_reduce_fp32 at 2 and 4 ranks sharing it (issue 43: the fp32 all-reduce),
#             test_gemm_layouts at 3 and 4 (issue 43: collective layouts, all-gather over dp),
#             tests/torch/test_torch_fp8.py at 1 and 2 (issue 42: the torch layers in FP8);
#   accuracy  tests/mpi/check_train.sh fp8 with CGEMM_TRAIN_BACKEND=cuda: FP8 training's loss
#             within 2% of bf16's at every 10th of 200 steps (1 rank, and dp 2 x tp 2 sharing the
#             GPU), the captured step's losses equal to the eager ones;
#   speed     cgemm-train --timed_passes 20 (no biases, tp 1) in bf16 and with --scaling current
#             and delayed, and the PyTorch eager peer (bench/peers/torch_train_mlp.py, bf16), on
#             CASES (default standard,llama70b: B 4, S 8192, 4096 -> 8192 and B 1, S 8192,
#             8192 -> 28672), one after another in this call;
#   kernels   cgemm-bench --parts copy_bandwidth,quantize (the quantize-transpose kernel against
#             a copy of the same bytes), test_grouped_plan on the CUDA backend (the FP8 tiles
#             among every path) and cgemm-bench --parts grouped_fp8 (the FP8 loop and tiles
#             against the bf16 tiles on the five MoE cases);
#   profile   ncu's GPU time of every kernel of cgemm-train's bf16 and FP8 (delayed) passes at
#             the standard shape, summed by kernel name (profile/train_phases.md);
#   probes    docs/data/2026-12-07-fp8-kernels/run_probes.sh (built there with nvcc);
#   transpose the quantize-transpose kernel alone: test_cuda_quantize, cgemm-bench --parts
#             quantize (1 MiB to 1 GiB) twice, each time after the same part of BEFORE (a
#             cgemm-bench of an earlier build, when set: the A/B in one call), and run_probes.sh
#             transpose (the runtime's kernel against copies of it at 8 to 4 blocks an SM, ncu).
# Not in the default STEPS: kernels, profile, probes, transpose. SCALINGS (default "none current delayed")
# narrows the speed step's runs, PEER=0 leaves its PyTorch peer out.
# Writes $OUT (default /tmp/cgemm-fp8-train): one log per step, speed/ and fp8_train.tgz (all of
# it). Exit 1 when a step failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.devbuild/bin
out=${OUT:-/tmp/cgemm-fp8-train}
cases=${CASES:-standard,llama70b}
mkdir -p "$out/speed"
. "$root/scripts/device-libs.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | head -1
status=0
steps=,${STEPS:-tests,accuracy,speed},
wants() { [[ $steps == *,$1,* ]]; }
t0=$SECONDS
run_step() {  # NAME TIMEOUT COMMAND...: its log in $OUT/NAME.log, its verdict on one line
  local name=$1 limit=$2
  shift 2
  if timeout "$limit" "$@" >"$out/$name.log" 2>&1; then
    echo "PASS $name ($((SECONDS - t0)) s)"
  else
    status=1
    echo "FAIL $name ($((SECONDS - t0)) s)"
    grep -E "Failure|FAIL|error|Error" "$out/$name.log" | head -8
  fi
}

if wants tests; then
  run_step test_cuda_quantize 120 mpirun -np 1 --bind-to none "$bin/test_cuda_quantize"
  grep -E "Fp8CodesTranspose|bandwidth|PASSED|FAILED" "$out/test_cuda_quantize.log" | head -8
  # QUICK=1: test_cuda_quantize only (a short lease).
  [ "${QUICK:-0}" = 1 ] && nps="" || nps="1 2"
  for np in $nps; do
    run_step "test_prequantized_np$np" 180 mpirun -np "$np" --bind-to none -x LD_LIBRARY_PATH \
      -x CGEMM_TEST_BACKEND=cuda "$bin/test_prequantized"
  done
  # Issue 43 item 3: the plain GEMM's all-reduce in float32 on the CUDA backend's transports.
  if [ -x "$bin/test_all_reduce_fp32" ] && [ "${QUICK:-0}" != 1 ]; then
    for np in 2 4; do
      run_step "test_all_reduce_fp32_np$np" 120 mpirun -np "$np" --bind-to none \
        -x LD_LIBRARY_PATH -x CGEMM_TEST_BACKEND=cuda "$bin/test_all_reduce_fp32"
    done
  fi
  # Issue 43 items 1 and 2: the collective GEMMs' new layouts and the all-gather reduced over dp,
  # at tp 3 and dp 2 x tp 2 (ranks sharing the GPU).
  if [ -x "$bin/test_gemm_layouts" ] && [ "${QUICK:-0}" != 1 ]; then
    for np in 3 4; do
      run_step "test_gemm_layouts_np$np" 120 mpirun -np "$np" --bind-to none \
        -x LD_LIBRARY_PATH -x CGEMM_TEST_BACKEND=cuda "$bin/test_gemm_layouts"
    done
  fi
  # Issue 42 item 3: the torch layers' FP8 training (tests/torch/test_torch_fp8.py) on CUDA
  # tensors, 1 and 2 ranks sharing the GPU (where the machine's python3 has torch).
  if [ "${QUICK:-0}" != 1 ] && python3 -c "import torch" 2>/dev/null; then
    for np in 1 2; do
      run_step "test_torch_fp8_np$np" 240 mpirun -np "$np" --bind-to none -x LD_LIBRARY_PATH \
        -x CGEMM_LIBRARY="$libs/libcgemm.so.0" -x PYTHONPATH="$root/python" \
        python3 "$root/tests/torch/test_torch_fp8.py" 4242 --device cuda
      grep -E "parity|PASS|checks" "$out/test_torch_fp8_np$np.log" | tail -2
    done
  fi
fi

if wants kernels; then
  run_step parts_quantize 200 mpirun -np 1 --bind-to none "$bin/cgemm-bench" --backend cuda \
    --parts copy_bandwidth,quantize --parts_max_copy_mib 1024 --out "$out/parts_quantize"
  grep -A12 "### quantize" "$out/parts_quantize/cgemm_parts.md"
  run_step test_grouped_plan 150 mpirun -np 1 --bind-to none "$bin/test_grouped_plan" --backend=cuda
  grep -E "PASSED|FAILED|SKIPPED" "$out/test_grouped_plan.log" | head -8
  run_step parts_grouped_fp8 200 mpirun -np 1 --bind-to none "$bin/cgemm-bench" --backend cuda \
    --parts grouped_fp8 --out "$out/parts_grouped_fp8"
  grep -A10 "### grouped_fp8" "$out/parts_grouped_fp8/cgemm_parts.md"
fi

if wants accuracy; then
  CGEMM_TRAIN_BACKEND=cuda run_step accuracy 420 bash "$root/tests/mpi/check_train.sh" fp8 \
    "$out/accuracy" mpirun -np "$bin/cgemm-train" "$root/configs/train_demo.ini"
  grep -E "against|loss|PASS" "$out/accuracy.log"
fi

if wants speed; then
  declare -A shape=([demo]="2 2048 768 3072" [standard]="4 8192 4096 8192"
    [llama70b]="1 8192 8192 28672")
  for c in ${cases//,/ }; do
    read -r b s h f <<<"${shape[$c]}"
    for scaling in ${SCALINGS:-none current delayed}; do
      run_step "speed_${c}_$scaling" 150 mpirun -np 1 --bind-to none "$bin/cgemm-train" \
        --backend cuda --dtype bf16 --bias off --batch "$b" --seq_len "$s" --hidden "$h" \
        --ffn "$f" --steps 3 --lr 1e-4 --timed_passes 20 --scaling "$scaling" \
        --report "$out/speed/cgemm_${c}_$scaling.json"
      grep -E "forward \+ backward pass" "$out/speed_${c}_$scaling.log"
    done
  done
  if [ "${PEER:-1}" = 1 ]; then
    echo "== PyTorch eager, bf16 (bench/peers/torch_train_mlp.py)"
    timeout 240 python3 "$root/bench/peers/torch_train_mlp.py" --out "$out/speed" --cases "$cases" \
      >"$out/torch.log" 2>&1 || { status=1; tail -n 5 "$out/torch.log"; }
    cat "$out/torch.log" | tail -n 6
  fi
  python3 - "$out/speed" "$cases" <<'PY' | tee "$out/fp8_speed.md"
import json, os, sys, glob
d, cases = sys.argv[1], sys.argv[2].split(",")
print("| case | bf16 ms | FP8 current ms | FP8 delayed ms | current / bf16 | delayed / bf16 |")
print("| --- | --- | --- | --- | --- | --- |")
for c in cases:
    ms = {}
    for s in ("none", "current", "delayed"):
        p = os.path.join(d, "cgemm_%s_%s.json" % (c, s))
        if os.path.exists(p):
            ms[s] = json.load(open(p))["timed_pass"]["median_ms"]
    if "none" in ms:
        cell = lambda s: "%.3f" % ms[s] if s in ms else "not run"
        ratio = lambda s: "%.2fx" % (ms["none"] / ms[s]) if s in ms else "-"
        print("| %s | %.3f | %s | %s | %s | %s |" % (
            c, ms["none"], cell("current"), cell("delayed"), ratio("current"), ratio("delayed")))
    else:
        print("| %s | missing: %s |" % (c, sorted(ms)))
for f in sorted(glob.glob(os.path.join(d, "*.csv"))):
    print("\n%s:\n%s" % (os.path.basename(f), open(f).read()))
PY
fi


if wants probes; then
  OUT=$out/probes run_step probes 300 bash "$root/docs/data/2026-12-07-fp8-kernels/run_probes.sh"
  grep -E "^\| |check|heuristic|FP8 tiles|device" "$out/probes/probes.log"
  grep -E "^  [a-z_0-9<>]+\(|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|L2 Hit|Mem Busy" \
    "$out/probes/ncu_transpose.txt" | head -40
fi

if wants transpose; then
  run_step test_cuda_quantize 120 mpirun -np 1 --bind-to none "$bin/test_cuda_quantize"
  grep -E "PASSED|FAILED" "$out/test_cuda_quantize.log" | head -4
  for round in 1 2; do
    for which in ${BEFORE:+before} after; do
      [ "$which" = before ] && bench=$BEFORE || bench=$bin/cgemm-bench
      run_step "quantize_${which}_$round" 200 mpirun -np 1 --bind-to none "$bench" \
        --backend cuda --parts quantize --parts_max_copy_mib 1024 \
        --out "$out/quantize_${which}_$round"
      grep -A14 "### quantize" "$out/quantize_${which}_$round/cgemm_parts.md" | cut -d'|' -f2,3,6,8,11
    done
  done
  OUT=$out/probes SASS_OF=${BEFORE:-} run_step probes_transpose 300 \
    bash "$root/docs/data/2026-12-07-fp8-kernels/run_probes.sh" transpose
  grep -E "^\| |^[a-z]+:|check|device|Used|_Z" "$out/probes/probes.log"
  grep -E "^  [a-zA-Z_:]|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|L2 Hit" \
    "$out/probes/ncu_transpose.txt" | head -45
fi

if wants profile; then
  # Untimed cuBLASLt algorithms: the autotune's trial GEMMs would be profiled too.
  mkdir -p "$out/profile"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for scaling in none delayed; do
    CGEMM_GEMM_AUTOTUNE=0 run_step "profile_$scaling" 200 "$ncu" --clock-control none \
      --metrics gpu__time_duration.sum --csv --print-units base --log-file \
      "$out/profile/ncu_train_$scaling.csv" "$bin/cgemm-train" --backend cuda --dtype bf16 \
      --bias off --batch 4 --seq_len 8192 --hidden 4096 --ffn 8192 --steps 1 --lr 1e-4 \
      --timed_passes 2 --scaling "$scaling"
  done
  python3 "$root/scripts/ncu_kernel_table.py" "$out/profile" | tee "$out/profile/train_phases.md"
fi

# The device tool brings back a limited number of files: one archive of them all.
tar -czf "$out/fp8_train.tgz" -C "$out" --exclude fp8_train.tgz . 2>/dev/null || true
exit $status
