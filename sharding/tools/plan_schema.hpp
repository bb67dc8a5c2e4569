#pragma once
// The schema of cgemm-plan's cases (tests/data/PLANNER_SCHEMA.md): for each op, the fields
// of its case (read into the planner's input struct, with their checks) and of its result.

#include <string>

#include "cgemm/sharding/gemm_abstract.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"
#include "cgemm/sharding/grouped_gemm.hpp"
#include "cgemm/sharding/reorder.hpp"
#include "plan_json.hpp"

namespace cgemm::plan {

Json entry_to_json(const SpecEntry& e);  // null, "axis" or ["a", "b"]
Json spec_to_json(const PartitionSpec& spec);

// op "gemm_sharding"
GemmShardingInput sharding_input_from_json(const Json& c);
Json to_json(const GemmSharding& s);  // lhs, lhs_scale, rhs, rhs_scale, bias, out, ...

// op "gemm_abstract"
GemmAbstractInput abstract_input_from_json(const Json& c);
Json to_json(const GemmAbstract& a);  // out_shape, out_dtype, workspace_bytes

// op "grouped_gemm"
GroupedGemmInput grouped_input_from_json(const Json& c);
Json to_json(const GroupedGemm& g);  // out_shape, out_dtype, scaling_mode, ... workspaces

// op "reorder"
struct ReorderCase {
  ReorderKind kind = ReorderKind::kTpspLeading;
  Shape shape;
  int dp_size = 1;
  int tpsp_size = 1;
};
ReorderCase reorder_case_from_json(const Json& c);

/// The answer to one case: {"id": ..., <result fields>} or {"id": ..., "error": "..."}.
/// Never throws for a bad case; a non-object gets "id": null.
Json answer_case(const Json& c);

}  // namespace cgemm::plan
