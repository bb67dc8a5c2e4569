#pragma once
// A second way to run a grouped GEMM's ragged-rows form on the CUDA backend, behind one small
// interface so GroupedGemmPlan (grouped_plan.cpp) stays free of cuBLAS: the runner gets a
// call whose sizes and pointers the plan has already checked and issues it on the backend's
// stream 0. Private to runtime/.

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cgemm/core/dtype.hpp"

namespace cgemm {
class Backend;
}

namespace cgemm::grouped {

/// The fixed geometry of a plan's ragged-rows calls (row-major, as GemmTask): lhs [M, K]
/// (lhs_trans: [K, M]), rhs [G, K, N] (rhs_trans: [G, N, K]), out [M, N], bias [G, N] or none;
/// in and out of `dtype` (bfloat16 or float16).
struct RaggedRowsGeometry {
  int64_t groups = 0, m_total = 0, n = 0, k = 0;
  bool lhs_trans = false, rhs_trans = false;
  DType dtype = DType::kBFloat16;
};

class RaggedRowsRunner {
 public:
  virtual ~RaggedRowsRunner() = default;
  /// out rows of group g = lhs rows of g @ rhs[g] (+ bias[g]) for every g; `sizes` holds G
  /// sizes, none negative, summing to M (checked by the caller). Asynchronous on stream 0.
  /// Returns false, having issued nothing, when this call's group pointers do not suit the
  /// runner (the caller then runs the loop); true when it issued the call.
  virtual bool run(std::span<const int32_t> sizes, const void* lhs, const void* rhs,
                   const void* bias, void* out) = 0;
};

/// "" when the cuBLAS grouped runner runs `g`, else why not (a clause for an error message).
std::string cublas_grouped_refusal(const RaggedRowsGeometry& g);

/// The cublasGemmGroupedBatchedEx runner on `be`'s stream 0 (be is the CUDA backend), with its
/// handle and staging made now on the current device. `name` names the plan in errors.
/// Throws cgemm::Error where cgemm was built without CUDA or `g` is refused.
std::unique_ptr<RaggedRowsRunner> make_cublas_grouped(Backend& be, const RaggedRowsGeometry& g,
                                                      const std::string& name);

}  // namespace cgemm::grouped
