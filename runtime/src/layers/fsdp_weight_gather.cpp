#include "fsdp_weight_gather.hpp"

#include <utility>

#include "cgemm/core/error.hpp"
#include "cgemm/sharding/reorder.hpp"
#include "program/shared_ring.hpp"

namespace cgemm {

FsdpWeightGather::FsdpWeightGather(Context& ctx, std::string name, Shape shard, int dim,
                                   DType dtype)
    : be_(ctx.backend()),
      ring_(ctx.fsdp_ring()),
      reorder_(ctx.fsdp_reorder()),
      name_(std::move(name)),
      shard_(std::move(shard)),
      dim_(dim),
      dtype_(dtype) {
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
  // Sized first, then a user of each (SharedRing::drop_user), so a refused growth leaves no
  // user behind: the destructor does not run for a constructor that throws.
  ring_.reserve(be_, gathered_bytes_);
  if (dim_ == 1) reorder_.reserve(be_, gathered_bytes_);
  ring_.add_user();
  if (dim_ == 1) reorder_.add_user();
  // Its all-gather in a captured step needs the fsdp group's collectives sized before (their
  // staging: every rank's block, as Engine::reserve_collectives counts).
  be_.reserve_collectives(Group::kFsdp, static_cast<size_t>(gathered_bytes_));
}

FsdpWeightGather::~FsdpWeightGather() {
  ring_.drop_user();
  if (dim_ == 1) reorder_.drop_user();
}

const void* FsdpWeightGather::execute(const void* src) {
  if (src == nullptr) throw Error("fsdp weight gather '" + name_ + "': null src");
  const std::string label = name_ + " fsdp all-gather";
  const auto bytes = static_cast<size_t>(shard_bytes_);
  void* whole = ring_.buffer().local;
  if (be_.capturing()) {
    // A graph holds these addresses: the buffers must not grow after it (SharedRing).
    ring_.mark_captured();
    if (dim_ == 1) reorder_.mark_captured();
  }
  if (dim_ == 0) {
    be_.all_gather(Group::kFsdp, src, whole, bytes, 0, label.c_str());
    return whole;
  }
  // [f, R, C] rank-major is [R, C f] after the dp-leading reorder of shape [R, C f] in f blocks
  // (gemm.py's reshape (tpsp, dp, n, m) -> (dp, n, tpsp, m) with dp 1, n = R, m = C).
  void* rank_major = reorder_.buffer().local;
  be_.all_gather(Group::kFsdp, src, rank_major, bytes, 0, label.c_str());
  be_.reorder(ReorderKind::kDpLeading, gathered_, 1, be_.group_size(Group::kFsdp), rank_major,
              whole, dtype_, 0);
  return whole;
}

}  // namespace cgemm
