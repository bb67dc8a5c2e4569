#include "cgemm/runtime/activation_gather.hpp"

#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm {

ActivationGather::ActivationGather(Context& ctx, std::string name, Shape local, DType dtype,
                                   bool transpose_batch_sequence)
    : be_(ctx.backend()), name_(std::move(name)), local_(std::move(local)), dtype_(dtype) {
  if (local_.size() != 3) {
    throw Error("activation gather '" + name_ + "': the shard must be 3-D, got " +
                shape_str(local_));
  }
  const int tp = be_.tp_size();
  const size_t seq = transpose_batch_sequence ? 0 : 1;
  gathered_ = local_;
  gathered_[seq] = checked_mul(local_[seq], tp, "activation gather '" + name_ + "' sequence");
  local_bytes_ = checked_mul(num_elements(local_), static_cast<int64_t>(dtype_size(dtype_)),
                             "activation gather '" + name_ + "' shard bytes");
  gathered_bytes_ = checked_mul(local_bytes_, tp, "activation gather '" + name_ + "' bytes");
  // Rank-major [tp, B, S/tp, H] is [B, S, H] only when B is 1 (or tp is).
  reorder_ = !transpose_batch_sequence && local_[0] > 1 && tp > 1;
}

ActivationGather::~ActivationGather() {
  if (rank_major_ != nullptr) be_.release(rank_major_);
}

void ActivationGather::execute(const void* src, void* dst) {
  if (src == nullptr || dst == nullptr) {
    throw Error("activation gather '" + name_ + "': null " + (src == nullptr ? "src" : "dst"));
  }
  const std::string label = name_ + " all-gather";
  const auto bytes = static_cast<size_t>(local_bytes_);
  if (be_.tp_size() == 1) {
    // No group to gather from: the CUDA backend has no transport at tp 1.
    be_.copy(dst, src, bytes, 0, label.c_str());
    return;
  }
  if (!reorder_) {
    be_.all_gather(Group::kTp, src, dst, bytes, 0, label.c_str());
    return;
  }
  if (rank_major_ == nullptr) rank_major_ = be_.allocate(static_cast<size_t>(gathered_bytes_));
  be_.all_gather(Group::kTp, src, rank_major_, bytes, 0, label.c_str());
  // dp 1: the reorder's batch split is gemm.py's dp blocks of the local batch, which the
  // rank-major layout of one dp rank's shards does not have.
  be_.reorder(ReorderKind::kDpLeading, gathered_, 1, be_.tp_size(), rank_major_, dst, dtype_, 0);
}

}  // namespace cgemm
