#pragma once
// fp64 reference for GemmTask on host copies of the operands (already rounded to their dtype
// and converted to double), with GemmTask's layouts: row-major, lhs [m, k] or [k, m], rhs
// [k, n] or [n, k], strided batch, leading dimensions, bias and alpha/beta.

#include <cmath>
#include <cstdint>
#include <vector>

#include "cgemm/gemm/gemm_task.hpp"

namespace cgemm::test {

/// out_ref must hold the output region as it was before the GEMM (used when beta != 0) and
/// receives the result, indexed like the device output (b * out_batch_stride + i * ldc + j).
/// lhs/rhs/bias are indexed like the device operands; `abs_sum` (same indexing as out) gets
/// sum_k |alpha * lhs * rhs| + |beta * c| + |bias|, the scale of the rounding error.
inline void reference_gemm(const GemmTask& t, const std::vector<double>& lhs,
                           const std::vector<double>& rhs, const std::vector<double>* bias,
                           std::vector<double>& out_ref, std::vector<double>& abs_sum) {
  abs_sum.assign(out_ref.size(), 0.0);
  for (int64_t b = 0; b < t.batch; ++b) {
    for (int64_t i = 0; i < t.m; ++i) {
      for (int64_t j = 0; j < t.n; ++j) {
        double acc = 0.0, mag = 0.0;
        for (int64_t k = 0; k < t.k; ++k) {
          const double a = lhs[static_cast<size_t>(
              b * t.lhs_batch_stride + (t.lhs_transposed ? k * t.lda + i : i * t.lda + k))];
          const double w = t.rhs_transposed ? rhs[static_cast<size_t>(j * t.ldb + k)]
                                            : rhs[static_cast<size_t>(k * t.ldb + j)];
          acc += a * w;
          mag += std::abs(a * w);
        }
        const auto o = static_cast<size_t>(b * t.out_batch_stride + i * t.ldc + j);
        double v = static_cast<double>(t.alpha) * acc;
        mag *= std::abs(static_cast<double>(t.alpha));
        if (t.beta != 0.0f) {
          v += static_cast<double>(t.beta) * out_ref[o];
          mag += std::abs(static_cast<double>(t.beta) * out_ref[o]);
        }
        if (bias != nullptr) {
          v += (*bias)[static_cast<size_t>(j)];
          mag += std::abs((*bias)[static_cast<size_t>(j)]);
        }
        out_ref[o] = v;
        abs_sum[o] = mag;
      }
    }
  }
}

}  // namespace cgemm::test
