#pragma once
// The per-group bias of the CUDA runners (cublas_grouped.cpp, cublaslt_tiles.cpp): neither
// cublasGemmGroupedBatchedEx nor cuBLASLt's pointer-array matmuls take a bias epilogue, so the
// output is first filled with each row's group bias and the GEMMs add into it (beta = 1).
// Private to the CUDA backend; compiled by nvcc too (C++17).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cgemm/core/dtype.hpp"

namespace cgemm::grouped {

/// out[r, j] = bias[g * n + j] for r < m_total, j < n, where g is the first group with
/// row_ends[g] > r (row_ends: G cumulative row ends in device memory, non-decreasing, so empty
/// groups own no row), or the last group for rows past the last end (padding, which the caller
/// zeroes after its GEMMs). out and bias are `dtype` (bfloat16, float16 or float32),
/// out row-major with row stride n. Returns the launch's error.
cudaError_t launch_fill_group_bias(void* out, const void* bias, const int64_t* row_ends,
                                   int64_t groups, int64_t m_total, int64_t n, DType dtype,
                                   cudaStream_t stream);

}  // namespace cgemm::grouped
