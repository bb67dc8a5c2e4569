#pragma once
// JSON <-> planner structs for cgemm-plan's JSON Lines protocol (the case contract is
// tests/data/PLANNER_SCHEMA.md). Kept apart from the tool's main so tests answer cases through
// exactly the code the tool runs.

#include <iosfwd>
#include <string>

#include <nlohmann/json.hpp>

#include "cgemm/sharding/gemm_abstract.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"
#include "cgemm/sharding/reorder.hpp"

namespace cgemm::plan {

// Ordered so that answers carry "id" first and fields in the documented order, and so a
// mesh object keeps its axis order.
using Json = nlohmann::ordered_json;

/// A case that is JSON but not usable: missing or ill-typed field, unknown op or name.
class CaseError : public Error {
 public:
  using Error::Error;
};

/// null -> nullopt; array of null / "axis" / ["axis", ...] entries -> PartitionSpec.
std::optional<PartitionSpec> spec_from_json(const Json& j, const std::string& what);
Json entry_to_json(const SpecEntry& e);  // null, "axis" or ["a", "b"]
Json spec_to_json(const PartitionSpec& spec);

GemmShardingInput sharding_input_from_json(const Json& c);
Json to_json(const GemmSharding& s);  // lhs, lhs_scale, rhs, rhs_scale, bias, out, ...

GemmAbstractInput abstract_input_from_json(const Json& c);
Json to_json(const GemmAbstract& a);  // out_shape, out_dtype, workspace_bytes

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

/// The cgemm-plan protocol: one answer line per non-blank input line. A line that is not
/// JSON is answered with an error too (so answers stay aligned with lines), reported on
/// `err`, and makes the return value 1; otherwise 0.
int run_plan_lines(std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace cgemm::plan
