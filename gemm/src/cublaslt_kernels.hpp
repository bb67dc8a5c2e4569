#pragma once
// Kernels of the cuBLASLt GEMM that cuBLASLt itself does not cover (private to gemm/).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cgemm/core/dtype.hpp"

namespace cgemm::detail {

/// out[b][i, j] += bias[j] for b < batch, i < m, j < n (row stride ldc, batch stride
/// batch_stride, in elements), computed in fp32 and rounded once to `dtype` (bf16, fp16 or
/// fp32; bias has the same dtype). Returns the launch's error.
cudaError_t launch_add_bias(void* out, const void* bias, DType dtype, int64_t batch, int64_t m,
                            int64_t n, int64_t ldc, int64_t batch_stride, cudaStream_t stream);

}  // namespace cgemm::detail
