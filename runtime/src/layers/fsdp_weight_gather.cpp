#include "fsdp_weight_gather.hpp"

#include <utility>

#include "cgemm/core/error.hpp"
#include "cgemm/sharding/reorder.hpp"

namespace cgemm {

FsdpWeightGather::FsdpWeightGather(Backend& be, std::string name, Shape shard, int dim, DType dtype)
    : be_(be), name_(std::move(name)), shard_(std::move(shard)), dim_(dim), dtype_(dtype) {
  const std::string what = "fsdp weight gather '" + name_ + "'";
  if (shard_.size() != 2 || shard_[0] < 0 || shard_[1] < 0 || (dim_ != 0 && dim_ != 1)) {
    throw Error(what + ": a 2-D shard sharded on dim 0 or 1, got " + shape_str(shard_) +
                " on dim " + std::to_string(dim_));
  }
  const int f = be_.group_size(Group::kFsdp);
  gathered_ = shard_;
  gathered_[static_cast<size_t>(dim_)] =
      checked_mul(shard_[static_cast<size_t>(dim_)], f, what + " dim");
  shard_bytes_ = checked_bytes(num_elements(shard_), dtype_size(dtype_), what + " shard");
  gathered_bytes_ = checked_mul(shard_bytes_, f, what + " bytes");
  if (dim_ == 1 && f > 1) rank_major_ = be_.allocate(static_cast<size_t>(gathered_bytes_));
}

FsdpWeightGather::~FsdpWeightGather() {
  if (rank_major_ != nullptr) be_.release(rank_major_);
}

void FsdpWeightGather::execute(const void* src, void* dst) {
  if (src == nullptr || dst == nullptr) {
    throw Error("fsdp weight gather '" + name_ + "': null " + (src == nullptr ? "src" : "dst"));
  }
  const std::string label = name_ + " fsdp all-gather";
  const int f = be_.group_size(Group::kFsdp);
  const auto bytes = static_cast<size_t>(shard_bytes_);
  if (f == 1) {
    be_.copy(dst, src, bytes, 0, label.c_str());
    return;
  }
  if (dim_ == 0) {
    be_.all_gather(Group::kFsdp, src, dst, bytes, 0, label.c_str());
    return;
  }
  // [f, R, C] rank-major is [R, C f] after the dp-leading reorder of shape [R, C f] in f blocks
  // (gemm.py's reshape (tpsp, dp, n, m) -> (dp, n, tpsp, m) with dp 1, n = R, m = C).
  be_.all_gather(Group::kFsdp, src, rank_major_, bytes, 0, label.c_str());
  be_.reorder(ReorderKind::kDpLeading, gathered_, 1, f, rank_major_, dst, dtype_, 0);
}

}  // namespace cgemm
