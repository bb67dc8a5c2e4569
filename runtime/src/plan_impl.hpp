#pragma once
// Private state of a GemmPlan: the GEMM geometry the schedule needs and the buffers it
// reuses across calls (allocated on first use, released with the plan).

#include <cstdint>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {

struct GemmPlan::Impl {
  Backend* backend = nullptr;
  int tp = 1, me = 0, dp = 1;
  int num_streams = 1;
  bool aggregate = false;

  // Path choice (OverlapOptions::policy).
  OverlapPolicy policy = OverlapPolicy::kAuto;
  bool path_decided = false;
  bool use_overlap = true;
  double auto_overlapped_ms = 0.0, auto_sequential_ms = 0.0;

  // Flattened local GEMM: lhs rows x k, out columns n.
  int64_t k = 0, n = 0;
  int64_t lhs_rows = 0;         // rows of this rank's lhs shard
  int64_t chunk_rows = 0;       // rows of one rank's sequence chunk (m of one ring step)
  bool rhs_transposed = false;  // rhs stored [N, K]
  int64_t ldb = 0;
  DType in = DType::kBFloat16, out = DType::kBFloat16;
  bool has_bias = false;
  bool fuse_bias = false;  // bias in the GEMM epilogue (no reduce axis), as gemm.py's fuse_bias

  // Placement without a reorder pass: for batch-first activations with local batch B > 1,
  // a chunk is B blocks of seq_rows rows, strided in the lhs (RS) or the output (AG).
  bool strided = false;   // gemm.py's need_reorder and B != 1
  int64_t batch = 1;      // B when strided
  int64_t seq_rows = 0;   // rows of one batch block of a chunk (S / tp)
  int64_t seq_total = 0;  // S (rows of one batch block of the full sequence)

  // Workspaces (backend memory), allocated on first use and reused.
  SymmetricBuffer ring;     // AG: gathered chunks; RS: received partials
  void* send = nullptr;     // RS: partials for the other ranks
  void* scratch = nullptr;  // reference path
  size_t scratch_bytes = 0;
  void* scratch2 = nullptr;
  size_t scratch2_bytes = 0;

  size_t in_size() const { return dtype_size(in); }
  size_t out_size() const { return dtype_size(out); }
  void release();
};

}  // namespace cgemm
