#pragma once
// cuBLASLt implementation of GemmTask (see gemm_task.hpp for the maths and the layouts).
//
// Row-major operands are handed to column-major cuBLASLt as the transposed problem
//   out^T [n, m] = op(rhs)^T [n, k] * lhs^T [k, m],
// which needs no copy: a row-major [r, c] matrix with row stride ld is a column-major [c, r]
// matrix with leading dimension ld. rhs_transposed = true is cuBLAS's "TN" layout.
//
// Types: lhs/rhs bf16, fp16 or fp32; accumulation in fp32 (CUBLAS_COMPUTE_32F, so fp32 inputs
// never use TF32); out (and bias) bf16/fp16 with the same input type, or fp32. The bias is fused
// as CUBLASLT_EPILOGUE_BIAS when cuBLASLt offers an algorithm for it, else added by a separate
// kernel after the GEMM. FP8 inputs need scale_inv operands GemmTask does not carry yet and are
// rejected; NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION is already read (as in Transformer
// Engine: set to 1 to use the split accumulator, i.e. no CUBLASLT_MATMUL_DESC_FAST_ACCUM).
//
// Algorithms: the cuBLASLt heuristic is asked once per problem key (shapes, dtypes, layouts,
// strides, batch, epilogue, pointer alignments) for up to kCandidates algorithms; later calls
// with the same key reuse the chosen one. Workspace: one per stream, 32 MiB on compute
// capability >= 9.0 (as cuBLAS recommends for Hopper), 4 MiB below.
//
// Not thread-safe: one host thread issues all GEMMs of an instance. Needs the device that was
// current at construction to be current at every call. Errors: cgemm::Error naming the
// cuBLAS status (cublasLtGetStatusName), the call and the problem's shapes.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>

#include "cgemm/gemm/gemm_task.hpp"

namespace cgemm {

class CublasLtGemm {
 public:
  static constexpr int kCandidates = 8;  // heuristic results kept per key (for later tuning)

  /// Uses the current CUDA device. `where` prefixes every error message (e.g. "rank 3").
  explicit CublasLtGemm(std::string where = {});
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  /// Allocates `stream`'s workspace now (otherwise it is allocated on the stream's first GEMM,
  /// and cudaMalloc may then stall the device).
  void add_stream(cudaStream_t stream);

  /// Enqueues the GEMM on `stream`. Throws cgemm::Error on an invalid task or a cuBLAS error.
  void run(const GemmTask& task, cudaStream_t stream);

  size_t workspace_bytes() const;  // per stream
  bool fp8_fast_accumulation() const;
  size_t cached_problems() const;  // distinct keys seen so far

  /// "cuBLASLt 13.1.0" (the library loaded at run time).
  static std::string version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgemm
