// The cuBLAS grouped runner (ragged_rows_runner.hpp): a grouped GEMM's ragged-rows call as one
// cublasGemmGroupedBatchedEx (cuBLAS 13.1, cublas_api.h) on the call's stream.
//
// Row-major to column-major, as gemm/src/cublaslt_plan.cpp maps a row-major GEMM: row-major
// out_g [m_g, N] = lhs_g [m_g, K] @ rhs_g [K, N] is column-major out_g^T [N, m_g] =
// rhs_g^T @ lhs_g^T, so cuBLAS's A is rhs_g (m = N), its B is lhs_g (n = m_g), k = K, and C is
// out_g with ldc = N. A row-major [r, c] with row stride ld is a column-major [c, r] with
// leading dim ld: rhs [K, N] (ld N) is A untransposed, rhs [N, K] (ld K) is A^T; lhs [m_g, K]
// (ld K) is B untransposed, lhs [K, M] (ld M, the group's columns) is B^T.
//
// Each non-empty group is one cuBLAS group of one problem (its m_g differs from the others');
// empty groups are left out. The host arrays (ops, sizes, leading dims, alpha, beta, group
// sizes) are the runner's vectors, read by cuBLAS during the call; the A/B/C pointer arrays
// must be device memory: they and the G row ends (for the bias kernel) go in one
// cudaMemcpyAsync per call from a pinned staging slot (staging_ring.hpp).

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"
#include "grouped_bias.hpp"
#include "ragged_rows_runner.hpp"
#include "staging_ring.hpp"

namespace cgemm::grouped {

namespace {

class CublasGrouped final : public RaggedRowsRunner {
 public:
  CublasGrouped(const RaggedRowsGeometry& g, const std::string& name)
      : g_(g), where_("grouped GEMM '" + name + "' (path cublas_grouped)") {
    const std::string why = cublas_grouped_refusal(g);
    if (!why.empty()) throw Error(where_ + ": not run: " + why);
    const auto groups = static_cast<size_t>(g.groups);
    // Slot layout: A, B, C pointers (G each), then G int64 row ends.
    ring_ = std::make_unique<StagingRing>(groups * (3 * sizeof(void*) + sizeof(int64_t)), where_);
    try {
      check_blas(cublasCreate(&handle_), "cublasCreate");
    } catch (...) {
      release();
      throw;
    }
    const cublasOperation_t op_a = g.rhs_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = g.lhs_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    ta_.assign(groups, op_a);
    tb_.assign(groups, op_b);
    m_.assign(groups, static_cast<int>(g.n));
    n_.resize(groups);  // per call: the group's rows
    k_.assign(groups, static_cast<int>(g.k));
    lda_.assign(groups, static_cast<int>(g.rhs_trans ? g.k : g.n));
    ldb_.assign(groups, static_cast<int>(g.lhs_trans ? g.m_total : g.k));
    ldc_.assign(groups, static_cast<int>(g.n));
    alpha_.assign(groups, 1.0f);
    beta_.resize(groups);
    group_size_.assign(groups, 1);
  }

  ~CublasGrouped() override { release(); }
  CublasGrouped(const CublasGrouped&) = delete;
  CublasGrouped& operator=(const CublasGrouped&) = delete;

  bool run(std::span<const int32_t> sizes, const int32_t* /*device_sizes*/, const void* lhs,
           const void* rhs, const void* bias, void* out, const GroupScales& /*scales*/,
           cudaStream_t stream) override {
    if (g_.m_total == 0 || g_.n == 0) return true;  // nothing to write
    // Every group empty (padded sizes summing to 0): no problem for cuBLAS (a group count of
    // 0), and every row is padding, which the engine zeroes.
    if (std::all_of(sizes.begin(), sizes.end(), [](int32_t s) { return s == 0; })) return true;
    const auto groups = static_cast<size_t>(g_.groups);
    if (!aligned(sizes, lhs, rhs, out)) return false;
    const StagingRing::Slot slot = ring_->acquire();
    char* host = slot.host;
    char* dev = slot.device;
    auto* a_ptrs = reinterpret_cast<const void**>(host);
    auto* b_ptrs = a_ptrs + groups;
    auto* c_ptrs = b_ptrs + groups;  // written as const void*, read by cuBLAS as void*
    auto* row_ends = reinterpret_cast<int64_t*>(c_ptrs + groups);
    const size_t in = dtype_size(g_.dtype);
    const auto* a = static_cast<const char*>(lhs);
    const auto* b = static_cast<const char*>(rhs);
    auto* o = static_cast<char*>(out);
    const float beta = bias != nullptr ? 1.0f : 0.0f;
    int count = 0;  // non-empty groups: cuBLAS's group_count
    int64_t off = 0;
    for (size_t gi = 0; gi < groups; ++gi) {
      const int64_t size = sizes[gi];
      if (size > 0) {
        const auto c = static_cast<size_t>(count++);
        a_ptrs[c] = b + static_cast<size_t>(static_cast<int64_t>(gi) * g_.k * g_.n) * in;
        b_ptrs[c] = a + static_cast<size_t>(g_.lhs_trans ? off : off * g_.k) * in;
        c_ptrs[c] = o + static_cast<size_t>(off * g_.n) * in;
        n_[c] = static_cast<int>(size);
        beta_[c] = beta;
      }
      off += size;
      row_ends[gi] = off;
    }
    // The pointer arrays sit packed at the front: move B and C down behind the `count` A's.
    if (static_cast<size_t>(count) < groups) {
      std::memmove(a_ptrs + count, b_ptrs, static_cast<size_t>(count) * sizeof(void*));
      std::memmove(a_ptrs + 2 * count, c_ptrs, static_cast<size_t>(count) * sizeof(void*));
    }
    // One copy per call: the pointers of the `count` problems, and the row ends (at their
    // fixed place in the slot) only when the bias kernel reads them.
    const size_t ptr_bytes = 3 * static_cast<size_t>(count) * sizeof(void*);
    const size_t ends_at = 3 * groups * sizeof(void*);
    ring_->commit(slot, bias != nullptr ? ring_->slot_bytes() : ptr_bytes, stream);
    if (bias != nullptr) {
      check_cuda(launch_fill_group_bias(out, bias, reinterpret_cast<const int64_t*>(dev + ends_at),
                                        g_.groups, g_.m_total, g_.n, g_.dtype, stream),
                 "the group bias kernel (M " + std::to_string(g_.m_total) + ", N " +
                     std::to_string(g_.n) + ")",
                 where_);
    }
    check_blas(cublasSetStream(handle_, stream), "cublasSetStream");
    const auto* dev_ptrs = reinterpret_cast<const void* const*>(dev);
    const cudaDataType_t t = g_.dtype == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
    check_blas(cublasGemmGroupedBatchedEx(
                   handle_, ta_.data(), tb_.data(), m_.data(), n_.data(), k_.data(), alpha_.data(),
                   dev_ptrs, t, lda_.data(), dev_ptrs + count, t, ldb_.data(), beta_.data(),
                   const_cast<void* const*>(dev_ptrs + 2 * count), t, ldc_.data(), count,
                   group_size_.data(), CUBLAS_COMPUTE_32F),
               "cublasGemmGroupedBatchedEx(" + std::to_string(count) + " groups, N " +
                   std::to_string(g_.n) + ", K " + std::to_string(g_.k) + ")");
    ring_->done(slot, stream);
    return true;
  }

 private:
  // cublasGemmGroupedBatchedEx faults (cudaErrorMisalignedAddress, sticky: the context is
  // lost) on a group whose A, B or C pointer is not 16-byte aligned, as an lhs [K, M] group
  // starting at an odd row offset is (seen on the H200 with test_grouped_plan). Such a call runs
  // the loop instead.
  bool aligned(std::span<const int32_t> sizes, const void* lhs, const void* rhs,
               const void* out) const {
    if (!bases_and_lds_aligned16(g_, lhs, rhs, out)) return false;
    if (!g_.lhs_trans) return true;  // group rows of lhs [M, K] sit on 16 bytes, as rhs[g], out
    const auto in = static_cast<int64_t>(dtype_size(g_.dtype));
    int64_t off = 0;
    for (size_t gi = 0; gi < sizes.size(); ++gi) {
      if (sizes[gi] > 0 && !aligned16(lhs, off * in)) return false;
      off += sizes[gi];
    }
    return true;
  }

  void check_blas(cublasStatus_t rc, const std::string& call) const {
    if (rc == CUBLAS_STATUS_SUCCESS) return;
    throw Error(where_ + ": " + call + " failed: " + cublasGetStatusName(rc) + " (" +
                cublasGetStatusString(rc) + ")");
  }

  void release() noexcept {
    ring_.reset();  // waits for every call: its copies and the GEMMs that read them
    if (handle_ != nullptr) static_cast<void>(cublasDestroy(handle_));
    handle_ = nullptr;
  }

  RaggedRowsGeometry g_;
  std::string where_;
  cublasHandle_t handle_ = nullptr;
  std::unique_ptr<StagingRing> ring_;
  std::vector<cublasOperation_t> ta_, tb_;
  std::vector<int> m_, n_, k_, lda_, ldb_, ldc_, group_size_;
  std::vector<float> alpha_, beta_;
};

}  // namespace

std::unique_ptr<RaggedRowsRunner> make_cublas_grouped(const RaggedRowsGeometry& g,
                                                      const std::string& name) {
  return std::make_unique<CublasGrouped>(g, name);
}

}  // namespace cgemm::grouped
