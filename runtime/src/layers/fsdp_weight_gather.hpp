#pragma once
// An FSDP-sharded weight gathered whole over the fsdp group, for the layer pair's dgrad
// (tp_linear.hpp). The forward gathers the weight inside its GEMM (fsdp/fsdp_gather.hpp); the
// backward gathers it again before the dgrad, as FSDP and TE reshard a weight after the forward
// and gather it again for the backward. The dgrad reads the weight contracting its output dim,
// which the in-GEMM gather does not split, so this gather runs on its own, before the dgrad
// GEMM: its time is not hidden.
//
// The gathered weight lands in the Context's fsdp ring (program/shared_ring.hpp), the buffer the
// FSDP plans gather into while their calls run: the layers keep no gathered weight of their own,
// so a model holds one there (the largest) however many layers it has (and one more in the
// reorder buffer for column shards). Reading it there
// is safe for the reason the plans' sharing is: the next call that writes the ring starts with a
// fork that waits for the dgrad on stream 0, and its peers write only after this rank's fork.
//
// The shard is this rank's [R, C] block of the tp shard [R * f, C] (dim 0: the rows are
// sharded, as the column-parallel weight's ('fsdp', 'tpsp')) or [R, C * f] (dim 1: the columns,
// as the row-parallel weight's ('tpsp', 'fsdp')); fsdp rank j holds block j. Rows land in place
// from one all-gather; columns are gathered rank-major into the Context's fsdp reorder buffer
// and laid out as [R, f * C] by the dp-leading reorder in f blocks (Backend::reorder).

#include <cstdint>
#include <string>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/runtime/context.hpp"

namespace cgemm {

class FsdpWeightGather {
 public:
  /// `shard`: 2-D; `dim`: 0 or 1, the dim sharded over the fsdp group of `ctx`. Grows the
  /// context's shared buffers to hold the gathered weight (collective over the fsdp group:
  /// every rank makes the same layers in the same order). Throws cgemm::Error for another shape
  /// or dim, or when a buffer must grow after a CUDA graph captured it.
  FsdpWeightGather(Context& ctx, std::string name, Shape shard, int dim, DType dtype);
  ~FsdpWeightGather();
  FsdpWeightGather(const FsdpWeightGather&) = delete;
  FsdpWeightGather& operator=(const FsdpWeightGather&) = delete;

  const Shape& gathered() const { return gathered_; }
  int64_t gathered_bytes() const { return gathered_bytes_; }

  /// Gathers every fsdp rank's shard (this rank's: `src`, backend memory) into the fsdp ring and
  /// returns it there (gathered(), row-major), valid until the next call of any FSDP plan or
  /// gather of the context. Collective over the fsdp group, on stream 0 (asynchronous on CUDA).
  const void* execute(const void* src);

 private:
  Backend& be_;
  SharedRing& ring_;
  SharedRing& reorder_;
  std::string name_;
  Shape shard_, gathered_;
  int dim_ = 0;
  DType dtype_;
  int64_t shard_bytes_ = 0, gathered_bytes_ = 0;
};

}  // namespace cgemm
