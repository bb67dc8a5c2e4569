#pragma once
// JSON <-> planner structs for cgemm-plan's JSON Lines protocol (the case contract is
// tests/data/PLANNER_SCHEMA.md). Kept apart from the tool's main so tests answer cases through
// exactly the code the tool runs.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cgemm/sharding/gemm_abstract.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"
#include "cgemm/sharding/reorder.hpp"

namespace cgemm::plan {

// Ordered so that answers carry "id" first and fields in the documented order, and so a
// mesh object keeps its axis order.
using Json = nlohmann::ordered_json;

// Resource limits (tests/data/PLANNER_SCHEMA.md, "Limits"). A case beyond one is answered
// with an error that names the limit; the lines after it are answered as usual.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;  // one input line, newline excluded
inline constexpr int kMaxDepth = 256;                     // nesting of arrays and objects
inline constexpr int64_t kMaxNdim = 1024;  // ndim, and the length of shapes, specs, dim lists
inline constexpr int64_t kMaxPermutationElements = int64_t{1} << 20;  // a reorder's elements
inline constexpr size_t kMaxAnswerBytes = size_t{16} << 20;           // one answer line

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

/// The answer to one input line.
struct LineAnswer {
  std::string text;      // one JSON object, without the newline
  std::string not_json;  // non-empty when the line is not (or was not read as) JSON: why
};

/// Answers one non-blank input line (without its newline); `lineno` is for messages only.
/// Never throws: a line beyond a limit, a number out of the range of a double, an
/// allocation failure, ... all give an error answer. The "id" of the answer is the case's,
/// copied unchanged (a number keeps its input text), recovered from a line that cannot be
/// parsed into a case when possible, else null.
LineAnswer answer_line(std::string_view line, size_t lineno = 0) noexcept;

/// For a process that answers lines (cgemm-plan's main): sets aside kMemoryReserveBytes of
/// address space, and a new-handler that gives it back when an allocation fails; the case
/// then stops with std::bad_alloc at the next safe point, unwinds in that room (nlohmann's
/// destructors allocate) and is answered with an error. run_plan_lines sets the reserve
/// aside again before the next line.
inline constexpr size_t kMemoryReserveBytes = size_t{16} << 20;
void install_memory_reserve();

/// The cgemm-plan protocol: one answer line per non-blank input line. A line that is not
/// JSON (or longer than kMaxLineBytes) is answered with an error too (so answers stay
/// aligned with lines), reported on `err`, and makes the return value 1; otherwise 0.
int run_plan_lines(std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace cgemm::plan
