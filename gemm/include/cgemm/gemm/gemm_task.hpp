#pragma once
// One GEMM as the runtime hands it to a backend: row-major operands, fp32 accumulation.
//
//   out[b][i, j] = alpha * sum_k lhs[b][i, k] * rhs[k, j] + beta * out[b][i, j] (+ bias[j])
//
// for b in [0, batch), with rhs either [K, N] (rhs_transposed = false, contracting dim 0) or
// [N, K] (rhs_transposed = true, contracting dim 1: the "TN" layout cuBLAS prefers).
// Strides let a chunked schedule write each chunk straight into its place in a larger
// output (leading dimension ldc, batch stride out_batch_stride), so no copy is needed.

#include <cstdint>

#include "cgemm/core/dtype.hpp"

namespace cgemm {

struct GemmTask {
  int64_t m = 0, n = 0, k = 0;         // rows of lhs/out, columns of out, contracting size
  DType in_dtype = DType::kBFloat16;   // dtype of lhs and rhs
  DType out_dtype = DType::kBFloat16;  // dtype of out and bias

  const void* lhs = nullptr;  // [m, k], row stride lda (elements)
  int64_t lda = 0;
  const void* rhs = nullptr;  // [k, n] row stride ldb, or [n, k] when rhs_transposed
  int64_t ldb = 0;
  bool rhs_transposed = false;
  void* out = nullptr;  // [m, n], row stride ldc
  int64_t ldc = 0;
  const void* bias = nullptr;  // [n] of out_dtype, added to every row; nullptr: none

  int64_t batch = 1;             // number of lhs/out blocks; rhs is shared by all
  int64_t lhs_batch_stride = 0;  // elements between consecutive lhs blocks
  int64_t out_batch_stride = 0;  // elements between consecutive out blocks

  float alpha = 1.0f;
  float beta = 0.0f;

  const char* label =
      nullptr;  // name of this GEMM in a trace (e.g. "up_proj chunk 1"); may be null
};

}  // namespace cgemm
