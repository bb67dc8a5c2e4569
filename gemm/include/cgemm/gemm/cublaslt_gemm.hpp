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
// Algorithms: per problem key (shapes, dtypes, layouts, strides, batch, epilogue, beta != 0,
// pointer alignments) the cuBLASLt heuristic is asked once for up to candidates() algorithms
// (CGEMM_GEMM_CANDIDATES, 1..kMaxCandidates, default kDefaultCandidates).
// With autotuning on (the default), the first call for a key then TIMES every candidate on the
// real problem, on the call's stream, with CUDA events: 1 warm-up each, then kTimedRuns rounds
// that time every candidate once in turn (so a clock drift during the tuning hits all alike),
// median of each candidate's runs, each run after the L2 was cleared by overwriting a scratch
// of twice its size (stream-ordered, freed after; as Triton's do_bench); the fastest candidate
// (ties: the heuristic's order) is cached and every later call with that key uses it without timing
// again. Candidates whose cublasLtMatmul returns an error are skipped; if every one fails, the call
// throws as before. Timing writes into the real output when beta == 0 (its old contents are not
// read, and the real GEMM follows on the same stream), and into a scratch output of the same extent
// (cudaMallocAsync on the stream, freed after) when beta != 0, so the output keeps its meaning.
// Heuristic #1 is used untimed when: CGEMM_GEMM_AUTOTUNE=0 (or "false", "off", "no", any
// case; see cgemm/core/env.hpp), the heuristic offers one candidate, the stream is being
// captured into a CUDA graph, or the scratch output cannot be allocated. That choice is final
// for the key as well.
// CGEMM_GEMM_LOG=1 prints every tuning's candidate times to stderr (the chosen one starred).
//
// COST: the first call for a new key is slower and BLOCKING: it enqueues (1 + kTimedRuns) x
// candidates GEMMs and then waits on the host until they are done, i.e. for everything queued
// on that stream before it (other streams are not synchronized), and takes a transient
// scratch of twice the L2 (cudaMallocAsync) to clear it. Do it in a warm-up run.
// Concurrent work on other streams (communication) is running during the timing, as in the
// real run; small GEMMs whose candidates differ by less than the noise may pick any of them.
// choices() / describe_choices() report the choice and the measured times per key.
//
// Workspace: one per stream, 32 MiB on compute capability >= 9.0 (as cuBLAS recommends for
// Hopper), 4 MiB below; timing uses the stream's own workspace.
//
// Threads: run() may be called from several host threads at once, on different streams (each
// thread with the construction device current). The key cache and the workspaces are guarded by
// a mutex; a key is built and tuned once, under its own lock (a second thread with the same new
// key waits for the choice; other keys go on). A GEMM with a fused bias sets the bias pointer in
// the key's shared descriptor, so its launch holds that key's lock for the cublasLtMatmul call;
// other launches hold no lock. Errors: cgemm::Error naming the cuBLAS status
// (cublasLtGetStatusName), the call and the problem's shapes.

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
  std::string problem;    // the (batch-folded) problem, as error messages name it
  int candidates = 0;     // algorithms the heuristic offered (at most candidates())
  int chosen = 0;         // the one in use, by heuristic rank: 0 = heuristic #1
  int algo_id = -1;       // its cuBLASLt algorithm id (CUBLASLT_ALGO_CONFIG_ID), -1 if unknown
  bool timed = false;     // chosen by timing; false: heuristic #1, see `note`
  double chosen_ms = -1;  // median time of the chosen one; -1 when not timed
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
