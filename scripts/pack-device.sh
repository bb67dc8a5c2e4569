#!/usr/bin/env bash
# pack-device.sh: builds cgemm here for the GPU machine (Hopper, sm_90; Boost and the CUDA
# runtime linked statically) and gathers what runs there into .devbuild/ (git-ignored):
# bin/ (cgemm-run, cgemm-bench, cgemm-compare, cgemm-train, cgemm-ucx-info, the GPU tests) and
# lib/ (OpenBLAS and its Fortran runtime, which that machine lacks; libcgemm.so.0, the C API for
# python/cgemm.py and tests/gpu/test_torch_op.py: CGEMM_LIBRARY=.devbuild/lib/libcgemm.so.0).
# NCCL, cuBLASLt, MPI and UCX (libucp.so.0: only UCP's stable API is used) come from that machine.
# Then: the device tool's run with carry [".devbuild"] and `bash scripts/device-check.sh`
# (the PyTorch op, its example and the borrowed communicator's membership: device-torch.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-device
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
gpu_tests=(test_cublaslt_gemm test_cublaslt_fp8 test_cuda_quantize test_cuda_backend test_ce_transport
  test_train_ops test_grouped_plan test_caller_stream test_gradient_buckets test_capture
  test_fsdp_gemm test_prequantized test_all_reduce_fp32 test_gemm_layouts)
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# The JAX plugin against the test venv's pinned jax (scripts/python-venv.sh), when it exists:
# device-jax.sh runs it under that machine's JAX.
jax=() jax_target=()
if [ -x "$root/build-venv/bin/python" ]; then
  jax=(-DCGEMM_JAX_PYTHON="$root/build-venv/bin/python")
  jax_target=(cgemm_jax)
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCGEMM_STATIC_BOOST=ON -DCMAKE_CUDA_RUNTIME_LIBRARY=Static "${launcher[@]}" "${jax[@]}" >/dev/null
# Only what is packed: the whole tree (every unit test) takes several times longer.
cmake --build "$build" -j"$(nproc)" --target cgemm-run cgemm-bench cgemm-compare cgemm-train \
  cgemm-ucx-info cgemm_capi "${jax_target[@]}" "${gpu_tests[@]}"
out=$root/.devbuild
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$build"/bin/cgemm-run "$build"/bin/cgemm-bench "$build"/bin/cgemm-compare "$build"/bin/cgemm-train \
  "$build"/bin/cgemm-ucx-info "$out/bin/"
# The GPU tests only: the device tool carries at most 64 MiB.
for t in "${gpu_tests[@]}"; do cp "$build/tests/$t" "$out/bin/"; done
for lib in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$out/lib/"
done
# The C API's library by its soname only (the loader's name; python/cgemm.py loads it).
cp -L "$build/lib/libcgemm.so.0" "$out/lib/"
if [ ${#jax_target[@]} -gt 0 ]; then
  cp "$build/lib/libcgemm_jax.so" "$out/lib/"
  strip --strip-debug "$out/lib/libcgemm_jax.so" 2>/dev/null || true
fi
# Programs lose their symbol tables too (17% of cgemm-run); the library keeps its dynamic ones.
strip --strip-all "$out"/bin/* 2>/dev/null || true
strip --strip-debug "$out/lib/libcgemm.so.0" 2>/dev/null || true
# The device tool carries 64 MiB with the working tree: OpenBLAS (36 MB) travels compressed and
# device-check.sh unpacks it.
xz -T2 -6 "$out/lib/libopenblas.so.0"
du -sh "$out"
