#pragma once
// cuBLASLt implementation of GemmTask (see gemm_task.hpp for the maths and the layouts).
//
// What run(task, stream) needs:
// - Shapes: m, n >= 0, k >= 1 (cuBLASLt has no empty contraction), 0 <= batch <= INT32_MAX
//   (m, n or batch = 0 is a no-op); lda >= k (>= m with lhs_transposed), ldb >= n
//   (>= k with rhs_transposed), ldc >= n; batch strides >= 0. Contiguous batch blocks of a
//   non-transposed lhs are run as one taller GEMM.
// - Dtypes: lhs/rhs bf16, fp16 or fp32; accumulation in fp32 (CUBLAS_COMPUTE_32F, so fp32 inputs
//   never use TF32); out (and bias) the input dtype or fp32.
// - FP8 (per-tensor scaling): lhs x rhs e4m3 x e4m3, e4m3 x e5m2 or e5m2 x e4m3 (in_dtype,
//   rhs_dtype); k a multiple of 16; below compute capability 10.0 only lhs [m, k] with rhs
//   stored [n, k] (rhs_transposed: cuBLAS's "TN"); out (and bias) bf16, fp16 or fp32, never 8-bit.
//   lhs_scale_inv / rhs_scale_inv (device floats; null: 1) become cuBLASLt's B / A scale
//   pointers of the call's descriptor; task.fast_accumulation sets CUBLASLT_MATMUL_DESC_FAST_ACCUM
//   (the planner clears it when NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION is "1"). Block
//   scaling (MXFP8, NVFP4) and FP4 are refused with one line: below 10.0 cuBLASLt has none.
// - Pointers: device memory of the construction device, non-null lhs/rhs/out, each aligned to
//   its element size at least. The alignment of each (up to 256 bytes) is told to the heuristic
//   and is part of the problem key: a choice is only reused for pointers as aligned as the ones
//   it was made for. When the heuristic offers no algorithm, run() throws.
// - beta: honoured for every layout and batch; beta == 0 never reads out.
// - Bias: fused as CUBLASLT_EPILOGUE_BIAS when cuBLASLt offers an algorithm for it, else added
//   by a separate kernel after the GEMM, on the same stream (GemmChoice::fused_bias says which).
//
// Mapping: row-major operands are handed to column-major cuBLASLt as the transposed problem
//   out^T [n, m] = op(rhs)^T [n, k] * op(lhs)^T [k, m],
// which needs no copy: a row-major [r, c] matrix with row stride ld is a column-major [c, r]
// matrix with leading dimension ld. cuBLASLt's A is rhs (CUBLAS_OP_T when rhs_transposed, the
// "TN" layout) and its B is lhs (CUBLAS_OP_T when lhs_transposed).
//
// Algorithms: chosen once per problem key (shapes, dtypes of both operands, layouts, strides,
// batch, bias, beta != 0, pointer alignments; FP8's scaling mode and fast accumulation) from up to
// candidates() cuBLASLt heuristic results, by timing them on the first call unless autotune() is
// off; later calls with the key reuse the choice. The first call of a key is therefore slower and
// blocks the host until the work queued on its stream is done: do it in a warm-up run. FP8
// candidates are timed with the call's own scale pointers, whose values are written before it on
// the same stream (any value times alike). The tuner's rules and their reasons: docs/GEMM_TUNER.md.
// choices() / describe_choices() report the choice and the measured times per key.
//
// Workspace: one per stream (add_stream, or the stream's first GEMM), 32 MiB on compute
// capability >= 9.0 (as cuBLAS recommends for Hopper), 4 MiB below; tuning uses the stream's
// own; freed at destruction (after a device-wide synchronize).
//
// Threads: run() may be called from several host threads at once, on different streams (each
// thread with the construction device current). The key cache and the workspaces are guarded by
// a mutex held for the look-up (and a new stream's workspace allocation) only; a key is built
// and tuned once, under its own lock (a second thread with the same new key waits for the
// choice; other keys go on). Once built, a key's plan is read-only: every call builds its own
// matmul descriptor with its own pointers (bias), so launches hold no lock.
//
// Errors: cgemm::Error, prefixed by the constructor's `where`: an invalid task names the
// problem and the rule broken; a cuBLAS error names the status (cublasLtGetStatusName), the call
// and the problem's shapes; a CUDA error names the call. A key whose build or tuning failed is
// tried again by its next call.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/core/error.hpp"
#include "cgemm/gemm/gemm_task.hpp"

namespace cgemm {

/// How one problem key's algorithm was chosen (for reports).
struct GemmChoice {
  std::string problem;      // the (batch-folded) problem, as error messages name it
  int candidates = 0;       // algorithms the heuristic offered (at most candidates())
  int chosen = 0;           // the one in use, by heuristic rank: 0 = heuristic #1
  int algo_id = -1;         // its cuBLASLt algorithm id (CUBLASLT_ALGO_CONFIG_ID), -1 if unknown
  bool fused_bias = false;  // bias added by the GEMM's epilogue; false: by a kernel, or no bias
  bool timed = false;       // chosen by timing; false: heuristic #1, see `note`
  double chosen_ms = -1;    // median time of the chosen one; -1 when not timed
  std::vector<double> candidate_ms;  // median per candidate by rank; -1: failed (or not timed)
  std::string note;                  // why not timed, or what failed
};

class CublasLtGemm {
 public:
  static constexpr int kDefaultCandidates = 8;  // heuristic results asked for and timed per key
  static constexpr int kMaxCandidates = 64;     // the most CGEMM_GEMM_CANDIDATES may ask for
  static constexpr int kTimedRuns = 5;          // timed runs per candidate (after 1 warm-up)

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
  /// Whether NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION leaves FP8 fast accumulation on (it is
  /// not "1"), read at construction; reports only: each task's fast_accumulation decides.
  bool fp8_fast_accumulation() const;
  size_t cached_problems() const;  // distinct keys with a chosen algorithm so far

  /// Whether the first call of a key times the candidates (CGEMM_GEMM_AUTOTUNE, read at
  /// construction: unset or anything but "0"/"false"/"off"/"no" means on).
  bool autotune() const;
  /// Heuristic results asked for per key (CGEMM_GEMM_CANDIDATES, read at construction; unset:
  /// kDefaultCandidates; outside 1..kMaxCandidates: cgemm::Error naming the variable).
  int candidates() const;
  /// Keys that were tuned by timing so far (each key at most once).
  int tunings() const;
  /// One entry per cached key (in key order): the chosen algorithm and its measured time.
  std::vector<GemmChoice> choices() const;
  /// choices() as text, one line per key.
  std::string describe_choices() const;

  /// "cuBLASLt 13.1.0" (the library loaded at run time).
  static std::string version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgemm
