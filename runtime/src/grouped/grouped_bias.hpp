#pragma once
// The per-group bias of the CUDA runners. The cuBLAS grouped path (cublas_grouped.cpp):
// cublasGemmGroupedBatchedEx has no epilogue, so the output is first filled with each row's
// group bias and the GEMM adds into it (beta = 1). The cuBLASLt tiles path (cublaslt_tiles.cpp):
// cuBLASLt's bias epilogue reads one bias vector per batch entry at a fixed stride, so a
// table of one bias row per tile is gathered first. Private to runtime/; compiled by nvcc too
// (C++17).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cgemm/core/dtype.hpp"

namespace cgemm::grouped {

/// out[r, j] = bias[g * n + j] for r < m_total, j < n, where g is the first group with
/// row_ends[g] > r (row_ends: G cumulative row ends in device memory, non-decreasing, the last
/// = m_total, so empty groups own no row). out and bias are `dtype` (bfloat16 or float16),
/// out row-major with row stride n. Returns the launch's error.
cudaError_t launch_fill_group_bias(void* out, const void* bias, const int64_t* row_ends,
                                   int64_t groups, int64_t m_total, int64_t n, DType dtype,
                                   cudaStream_t stream);

/// table[i * n + j] = bias[tile_groups[i] * n + j] for i < tiles, j < n: the bias row of each
/// tile's group (tile_groups: `tiles` group indices in device memory). table and bias hold
/// elements of `element_bytes` (2 or 4) bytes, copied as bits. Returns the launch's error.
cudaError_t launch_gather_tile_bias(void* table, const void* bias, const int32_t* tile_groups,
                                    int64_t tiles, int64_t n, size_t element_bytes,
                                    cudaStream_t stream);

}  // namespace cgemm::grouped
