// The rule of which ragged-rows calls the cuBLAS grouped runner takes (ragged_rows_runner.hpp):
// compiled in every build, so the plan states it the same way with or without CUDA.

#include <limits>

#include "ragged_rows_runner.hpp"

namespace cgemm::grouped {

std::string cublas_grouped_refusal(const RaggedRowsGeometry& g) {
  if (g.dtype != DType::kBFloat16 && g.dtype != DType::kFloat16) {
    // cuBLAS would take float32 too, but the issue scopes this path to the half types it
    // names for cublasGemmGroupedBatchedEx; float32 keeps the loop's cuBLASLt GEMMs.
    return "it runs bfloat16 and float16 only, not " + std::string(dtype_name(g.dtype));
  }
  if (g.k == 0) return "K = 0 (an empty contraction, only the bias is written)";
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (g.m_total > kMax || g.n > kMax || g.k > kMax) {
    return "a dim over int32 (M " + std::to_string(g.m_total) + ", N " + std::to_string(g.n) +
           ", K " + std::to_string(g.k) + "; cuBLAS's sizes are int)";
  }
  return "";
}

}  // namespace cgemm::grouped
