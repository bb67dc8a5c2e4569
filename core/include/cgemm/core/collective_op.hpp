#pragma once
// The collective fused with a GEMM. It lives in core/ rather than with the planner because it
// is shared vocabulary: the planner infers specs from it, and runtime/ (GemmPlan's descriptor,
// the executor), launcher/ (configs, reports) and users' programs name the collective GEMM they
// run with it. (ScalingMode, read only by the planner, stays in sharding/.)

#include <string_view>

namespace cgemm {

/// The collective fused with a GEMM (Transformer Engine's CollectiveOp).
enum class CollectiveOp { kNone, kAllGather, kReduceScatter };
std::string_view collective_name(CollectiveOp op);  // "none", "all_gather", "reduce_scatter"
/// Throws cgemm::Error naming the value and the known names.
CollectiveOp parse_collective(std::string_view name);

}  // namespace cgemm
