#pragma once
// An FSDP-sharded weight gathered whole over the fsdp group, for the layer pair's dgrad
// (tp_linear.hpp). The forward gathers the weight inside its GEMM (fsdp/fsdp_gather.hpp); the
// backward gathers it again before the dgrad, as FSDP and TE reshard a weight after the forward
// and gather it again for the backward. The dgrad reads the weight contracting its output dim,
// which the in-GEMM gather does not split (a contracting dim of an rhs stored [N, K]), so this
// gather runs on its own, before the dgrad GEMM: its time is not hidden.
//
// The shard is this rank's [R, C] block of the tp shard [R * f, C] (dim 0: the rows are
// sharded, as the column-parallel weight's ('fsdp', 'tpsp')) or [R, C * f] (dim 1: the columns,
// as the row-parallel weight's ('tpsp', 'fsdp')); fsdp rank j holds block j. Rows land in place
// from one all-gather; columns go through a rank-major buffer and the dp-leading reorder with
// f blocks (Backend::reorder), which lays [f, R, C] out as [R, f * C].

#include <cstdint>
#include <string>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/runtime/backend.hpp"

namespace cgemm {

class FsdpWeightGather {
 public:
  /// `shard`: 2-D; `dim`: 0 or 1, the dim sharded over the fsdp group of `be`. Throws
  /// cgemm::Error for another shape or dim.
  FsdpWeightGather(Backend& be, std::string name, Shape shard, int dim, DType dtype);
  ~FsdpWeightGather();
  FsdpWeightGather(const FsdpWeightGather&) = delete;
  FsdpWeightGather& operator=(const FsdpWeightGather&) = delete;

  const Shape& gathered() const { return gathered_; }
  int64_t gathered_bytes() const { return gathered_bytes_; }
  /// The bytes it holds besides the caller's: the rank-major buffer of a column gather.
  int64_t own_bytes() const { return dim_ == 1 ? gathered_bytes_ : 0; }

  /// dst (gathered(), backend memory) = every fsdp rank's shard in its place. Collective over
  /// the fsdp group, on stream 0 (asynchronous on CUDA). src and dst must not overlap.
  void execute(const void* src, void* dst);

 private:
  Backend& be_;
  std::string name_;
  Shape shard_, gathered_;
  int dim_ = 0;
  DType dtype_;
  int64_t shard_bytes_ = 0, gathered_bytes_ = 0;
  void* rank_major_ = nullptr;  // dim 1 only
};

}  // namespace cgemm
