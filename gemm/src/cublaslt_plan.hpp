#pragma once
// One cached cuBLASLt problem (private to gemm/): its key, its matrix layouts and the
// heuristic's candidates, immutable once built and then read by any thread without a lock;
// and the matmul descriptor, which is built per call (CallDesc) because it carries the call's
// pointers.

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cgemm/gemm/cublaslt_gemm.hpp"
#include "cgemm/gemm/gemm_task.hpp"

namespace cgemm::detail {

/// The problem as error messages name it.
std::string problem_str(const GemmTask& t);

/// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address.
uint32_t alignment_of(const void* p);

/// What every plan of one CublasLtGemm shares; fixed at construction.
struct LtContext {
  std::string where;  // prefixes every error message
  cublasLtHandle_t handle = nullptr;
  size_t workspace = 0;        // bytes per stream
  bool fast_accum = true;      // what NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION asks (reports only)
  const float* one = nullptr;  // a device float 1.0: the scale_inv of an FP8 operand given none
  int cc = 0;                  // the device's compute capability, e.g. 90
  int candidates = CublasLtGemm::kDefaultCandidates;

  /// Throws cgemm::Error naming the status, `call` and (when given) the problem.
  void check(cublasStatus_t st, std::string_view call, const GemmTask* t) const;
};

/// Everything the heuristic's answer depends on. Pointer values are not in it, only their
/// alignments: cuBLASLt picks kernels for the alignment it is told, so a cached algorithm is
/// only reused for pointers at least as aligned as the ones it was chosen for.
struct PlanKey {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0, lhs_stride = 0, out_stride = 0;
  int in_dtype = 0, rhs_dtype = 0, out_dtype = 0;
  int scaling = 0;          // BlockScaling of quantized inputs
  bool fast_accum = false;  // quantized inputs only (else false, so it splits no key)
  bool lhs_transposed = false, rhs_transposed = false, bias = false, beta_nonzero = false;
  uint32_t align_lhs = 0, align_rhs = 0, align_out = 0, align_bias = 0;
  auto operator<=>(const PlanKey&) const = default;
};

PlanKey plan_key(const GemmTask& t);

/// A problem's layouts and candidates, best first; `chosen` indexes the one in use.
struct LtPlan {
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  size_t chosen = 0;
  bool fused_bias = false;  // else the bias (if any) is added by a kernel afterwards
  GemmChoice choice;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() { reset(); }
  void reset();
};

/// Fills `plan` (layouts and candidates) for the problem; throws when there is no algorithm.
void build_plan(LtPlan& plan, const LtContext& ctx, const GemmTask& t, const PlanKey& key);

/// The matmul descriptor of one call, in storage of its own (cublasLtMatmulDescInit: no
/// allocation, nothing to destroy). Nothing mutable is shared between calls, so the call's
/// pointers (the bias, FP8's scale_inv) are set without a lock. cuBLASLt
/// reads the descriptor during cublasLtMatmul only, so it may end with the call.
class CallDesc {
 public:
  CallDesc(const LtContext& ctx, const GemmTask& t, bool fuse_bias);
  CallDesc(const CallDesc&) = delete;
  CallDesc& operator=(const CallDesc&) = delete;
  cublasLtMatmulDesc_t get() { return &storage_; }

 private:
  cublasLtMatmulDescOpaque_t storage_{};
};

/// Enqueues the GEMM with candidate `candidate` of `plan`, writing `out` (the task's output or
/// a scratch of its extent); returns cuBLASLt's status.
cublasStatus_t launch(const LtContext& ctx, const LtPlan& plan, CallDesc& desc, size_t candidate,
                      const GemmTask& t, void* out, void* ws, cudaStream_t stream);

}  // namespace cgemm::detail
