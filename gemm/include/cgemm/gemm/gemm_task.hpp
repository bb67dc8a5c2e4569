#pragma once
// One GEMM as the runtime hands it to a backend: row-major operands, fp32 accumulation.
//
//   out[b][i, j] = alpha * sum_p op(lhs)[b][i, p] * op(rhs)[p, j] + beta * out[b][i, j]
//                  (+ bias[j])
//
// for b in [0, batch), i < m, j < n, p < k, with
//   lhs [m, k] (lhs_transposed = false, contracting dim 1), or [k, m] (lhs_transposed = true,
//       contracting dim 0: x^T of a weight-gradient GEMM, used without a copy), row stride lda;
//   rhs [k, n] (rhs_transposed = false, contracting dim 0), or [n, k] (rhs_transposed = true,
//       contracting dim 1: the "TN" layout cuBLAS prefers), row stride ldb;
//   out [m, n], row stride ldc.
// beta != 0 reads out (accumulation, e.g. into a gradient); beta == 0 never reads it, so it
// may hold anything (even NaN). The bias is added after alpha and beta are applied.
// Strides let a chunked schedule write each chunk straight into its place in a larger
// output (leading dimension ldc, batch stride out_batch_stride), so no copy is needed.
//
// Quantized inputs (quantize_task.hpp): in_dtype is then the lhs's FP8 (or FP4) format and
// rhs_dtype the rhs's, and the products are dequantized in the fp32 accumulator:
//   out = alpha * lhs_scale_inv * rhs_scale_inv * sum_p dq(lhs)[i, p] * dq(rhs)[p, j] ...
// where dq multiplies each element by its block's scale (MXFP8, NVFP4) or by 1 (tensor
// scaling). Block scales lie [rows, k / block] (lhs) and [n, k / block] (rhs), row-major, one
// byte each; a batch block's lhs scales lie lhs_batch_stride / block bytes apart.

#include <cstdint>
#include <optional>

#include "cgemm/core/dtype.hpp"
#include "cgemm/gemm/quantize_task.hpp"

namespace cgemm {

struct GemmTask {
  int64_t m = 0, n = 0, k = 0;         // rows of out, columns of out, contracting size
  DType in_dtype = DType::kBFloat16;   // dtype of lhs and rhs
  DType out_dtype = DType::kBFloat16;  // dtype of out and bias

  const void* lhs = nullptr;  // [m, k], or [k, m] when lhs_transposed; row stride lda
  int64_t lda = 0;            // (elements) >= k, or >= m when lhs_transposed
  bool lhs_transposed = false;
  const void* rhs = nullptr;  // [k, n], or [n, k] when rhs_transposed; row stride ldb
  int64_t ldb = 0;            // (elements) >= n, or >= k when rhs_transposed
  bool rhs_transposed = false;
  void* out = nullptr;  // [m, n], row stride ldc >= n
  int64_t ldc = 0;
  const void* bias = nullptr;  // [n] of out_dtype, added to every row; nullptr: none

  int64_t batch = 1;             // number of lhs/out blocks; rhs is shared by all
  int64_t lhs_batch_stride = 0;  // elements between consecutive lhs blocks
  int64_t out_batch_stride = 0;  // elements between consecutive out blocks

  float alpha = 1.0f;
  float beta = 0.0f;  // 0: out is only written; else out is read and accumulated into

  const char* label =
      nullptr;  // name of this GEMM in a trace (e.g. "up_proj chunk 1"); may be null

  // Quantized inputs: see the top of this file. Pointers are backend memory.
  std::optional<DType> rhs_dtype;        // nullopt: in_dtype
  const float* lhs_scale_inv = nullptr;  // one fp32 value; null: 1
  const float* rhs_scale_inv = nullptr;  // one fp32 value; null: 1
  BlockScaling block_scaling = BlockScaling::kTensor;
  const uint8_t* lhs_block_scale = nullptr;  // MXFP8 / NVFP4 only
  const uint8_t* rhs_block_scale = nullptr;
  bool fast_accumulation = true;  // FP8 on cuBLASLt: off with
                                  // NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION=1

  DType rhs_type() const { return rhs_dtype.value_or(in_dtype); }
  bool quantized() const { return is_fp8(in_dtype) || in_dtype == DType::kFloat4E2M1; }
};

}  // namespace cgemm
