#pragma once
// The collective fused with a GEMM. It lives in core/ rather than with the planner because it
// is shared vocabulary: the planner infers specs from it, and runtime/ (GemmPlan's descriptor,
// the executor), launcher/ (configs, reports) and users' programs name the collective GEMM they
// run with it. (ScalingMode and its table, shared the same way, are in scaling_modes.hpp.)

#include <string_view>

namespace cgemm {

/// The collective fused with a GEMM (Transformer Engine's CollectiveOp).
enum class CollectiveOp { kNone, kAllGather, kReduceScatter };
std::string_view collective_name(CollectiveOp op);  // "none", "all_gather", "reduce_scatter"
/// Throws cgemm::Error naming the value and the known names.
CollectiveOp parse_collective(std::string_view name);

/// The collectives of one dense layer's forward GEMM and of its backward (dgrad) GEMM
/// (Transformer Engine's CollectiveOpSet). The backward collective is the transpose of the
/// forward one: a layer that all-gathers its sequence-sharded input forward owes each rank the
/// gradient of its own shard, so its dgrad reduce-scatters; a layer that reduce-scatters forward
/// receives a sequence-sharded output gradient and all-gathers it for the dgrad.
struct CollectiveOpSet {
  CollectiveOp forward = CollectiveOp::kNone;
  CollectiveOp backward = CollectiveOp::kNone;

  /// gemm.py's CollectiveOpSet.create: all_gather -> reduce_scatter, reduce_scatter ->
  /// all_gather, none -> none.
  static constexpr CollectiveOpSet create(CollectiveOp forward_op) {
    switch (forward_op) {
      case CollectiveOp::kAllGather:
        return {forward_op, CollectiveOp::kReduceScatter};
      case CollectiveOp::kReduceScatter:
        return {forward_op, CollectiveOp::kAllGather};
      case CollectiveOp::kNone:
        break;
    }
    return {CollectiveOp::kNone, CollectiveOp::kNone};
  }

  friend constexpr bool operator==(const CollectiveOpSet&, const CollectiveOpSet&) = default;
};

/// gemm.py's noop_collective_op_set.
inline constexpr CollectiveOpSet kNoopCollectiveOpSet =
    CollectiveOpSet::create(CollectiveOp::kNone);

}  // namespace cgemm
