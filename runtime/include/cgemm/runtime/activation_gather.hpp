#pragma once
// A sequence-parallel activation all-gathered over the TP group into its global sequence
// order, on the context's backend. A layer's weight gradient needs the whole sequence of an
// activation that the forward keeps sharded over the sequence (Megatron's and Transformer
// Engine's sequence parallelism): the column-parallel layer's input x for dW = AG(x)^T dy, the
// row-parallel layer's output gradient dy for dW = h^T AG(dy). TE gathers x again during the
// dgrad GEMM (its "bulk" all-gather overlap); this is that all-gather, on its own.
//
// Shapes in elements, outermost first. The shard is this rank's [B, S/tp, H] (or, with
// transpose_batch_sequence, [S/tp, B, H]) as the planner shards an activation (dp, tpsp, None)
// (or (tpsp, dp, None)): TP rank r holds sequence rows [r S/tp, (r+1) S/tp). B is the local
// batch (this dp rank's). The result is [B, S, H] (or [S, B, H]): every rank's shard in its
// place, the same bits on every rank of the TP group.

#include <cstdint>
#include <string>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/runtime/context.hpp"

namespace cgemm {

class ActivationGather {
 public:
  /// `local`: this rank's shard shape, 3-D. Throws cgemm::Error for another rank count, a
  /// negative dim, or a gathered size that overflows int64.
  ActivationGather(Context& ctx, std::string name, Shape local, DType dtype,
                   bool transpose_batch_sequence);
  ~ActivationGather();
  ActivationGather(const ActivationGather&) = delete;
  ActivationGather& operator=(const ActivationGather&) = delete;

  const Shape& local() const { return local_; }
  const Shape& gathered() const { return gathered_; }  // the sequence dim times tp
  int64_t gathered_bytes() const { return gathered_bytes_; }

  /// dst (gathered(), backend memory) = every TP rank's src (local()) in sequence order.
  /// Collective over the TP group: every rank calls it in the same order. On stream 0 of the
  /// backend (asynchronous on CUDA, as GemmPlan::execute). src and dst must not overlap.
  /// Sequence-first shards, and batch-first ones of local batch 1, land in place (their
  /// rank-major order is the sequence order); batch-first shards of batch > 1 go through a
  /// rank-major buffer and gemm.py's dp-leading reorder (sharding/reorder.hpp), the pass the
  /// all-gather GEMM's sequential path applies to its output.
  void execute(const void* src, void* dst);

 private:
  Backend& be_;
  std::string name_;
  Shape local_, gathered_;
  DType dtype_;
  bool reorder_ = false;
  int64_t local_bytes_ = 0, gathered_bytes_ = 0;
  void* rank_major_ = nullptr;  // allocated on first use when reorder_
};

}  // namespace cgemm
