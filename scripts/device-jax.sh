#!/usr/bin/env bash
# device-jax.sh: the JAX plugin on the GPU machine, over a .devbuild/ made by pack-device.sh
# (libcgemm.so.0 and libcgemm_jax.so, the latter built here against the pinned jax's FFI
# headers); builds nothing. That machine's own JAX (python3) runs it.
#  1. tests/jax/test_jax_plugin.py on JAX's gpu platform: 1 rank (the CUDA backend on the GPU),
#     then 2, 3 and 4 ranks sharing the GPU (gpu_sharing: copy engines);
#  2. examples/jax_mlp.py, 50 SGD steps against plain JAX: 1 rank, and 2 ranks sharing the GPU
#     in float32 and bfloat16;
#  3. bench/jax_ffi_bench.py: cgemm's GEMM in jit against jnp.dot at tp 1, and the FFI overhead;
#  4. XLA's command buffers (CUDA graphs) on for custom calls: the test at 1 rank and at 2
#     sharing the GPU under those XLA_FLAGS (cgemm's calls stay outside them: no trait).
# ONLY=command_buffers runs step 4 alone.
# Logs in $OUT (else /tmp/cgemm-device-jax), a summary at the end; exit 1 when anything failed.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/cgemm-device-jax}
mkdir -p "$out"
. "$root/scripts/device-libs.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export CGEMM_LIBRARY=$libs/libcgemm.so.0 CGEMM_JAX_LIBRARY=$libs/libcgemm_jax.so
export PYTHONPATH=$root/python XLA_PYTHON_CLIENT_PREALLOCATE=false JAX_PLATFORMS=cuda
mpi="mpirun --bind-to none -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS -x LD_LIBRARY_PATH -x CGEMM_LIBRARY -x CGEMM_JAX_LIBRARY -x PYTHONPATH -x XLA_PYTHON_CLIENT_PREALLOCATE -x JAX_PLATFORMS"
status=0
summary=()
step() {
  local name=$1
  shift
  local t0=$SECONDS
  if timeout 300 "$@" >"$out/$name.log" 2>&1; then
    summary+=("PASS  $name ($((SECONDS - t0)) s; $(grep -E 'checks|PASSED|largest' "$out/$name.log" | tail -1))")
  else
    status=1
    summary+=("FAIL  $name ($((SECONDS - t0)) s; $out/$name.log)")
  fi
  tail -n 12 "$out/$name.log"
}
python3 - <<'PY' 2>&1 | tee "$out/jax_version.txt"
import jax, jax.ffi, os, re
inc = jax.ffi.include_dir()
text = open(os.path.join(inc, "xla/ffi/api/c_api.h")).read()
ver = [re.search(rf"#define XLA_FFI_API_{k} (\d+)", text).group(1) for k in ("MAJOR", "MINOR")]
print("JAX", jax.__version__, "jaxlib", jax.lib.__version__ if hasattr(jax.lib, "__version__") else "",
      "devices", jax.devices(), "FFI API (its headers)", ".".join(ver))
PY
seed=$(date +%s)
if [ "${ONLY:-}" != command_buffers ]; then
step test_jax_np1 $mpi -np 1 python3 "$root/tests/jax/test_jax_plugin.py" "$seed" --platform gpu
for np in 2 3 4; do
  step "test_jax_np${np}_shared" $mpi -np $np python3 "$root/tests/jax/test_jax_plugin.py" "$seed" \
    --platform gpu --gpu_sharing
done
step jax_mlp_np1 $mpi -np 1 python3 "$root/examples/jax_mlp.py" --steps 50
step jax_mlp_np2_shared $mpi -np 2 python3 "$root/examples/jax_mlp.py" --steps 50 --gpu_sharing
step jax_mlp_np2_shared_bf16 $mpi -np 2 python3 "$root/examples/jax_mlp.py" --steps 50 \
  --gpu_sharing --dtype bfloat16
step jax_ffi_bench python3 "$root/bench/jax_ffi_bench.py"
fi
# XLA's command buffers for custom calls on: cgemm's handlers do not declare the trait
# (ffi_handlers.cpp says why), so XLA keeps their calls out of its command buffers and runs the
# rest of the program in them; the test must pass as without the flags. (With the trait
# declared, on the H100 2026-12-06, it passed too and XLA's log showed it tracing the calls.)
export XLA_FLAGS="--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL --xla_gpu_graph_min_graph_size=1"
step test_jax_np1_command_buffers $mpi -x XLA_FLAGS -np 1 python3 "$root/tests/jax/test_jax_plugin.py" \
  "$seed" --platform gpu
step test_jax_np2_shared_command_buffers $mpi -x XLA_FLAGS -np 2 python3 \
  "$root/tests/jax/test_jax_plugin.py" "$seed" --platform gpu --gpu_sharing
unset XLA_FLAGS
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $status
