#pragma once
// Reading a case's fields: each reader checks the JSON type, the range and the limits of
// one kind of field, and throws CaseError with the field's path ("lhs.shape[2]") when the
// value does not fit. The ops' schemas (plan_schema.cpp) are written in these readers.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cgemm/core/shape.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"
#include "plan_json.hpp"

namespace cgemm::plan {

/// A value as quoted in a message: its JSON text, cut short when long.
std::string brief(const Json& j);

/// obj[key]; `where` is the path of obj ("" for the case itself).
const Json& field(const Json& obj, const char* key, const std::string& where);
/// The path of obj[key] in messages.
std::string path(const std::string& where, const char* key);

int64_t as_int64(const Json& j, const std::string& what);
int as_int(const Json& j, const std::string& what);
int64_t as_nonneg(const Json& j, const std::string& what);
bool as_bool(const Json& j, const std::string& what);
const std::string& as_string(const Json& j, const std::string& what);

/// A name such as a dtype or a collective op, read with a planner's parse function.
template <typename Parse>
auto parse_name(const Json& j, const std::string& what, Parse parse) {
  const std::string& s = as_string(j, what);
  try {
    return parse(s);
  } catch (const Error& e) {
    // The name parsers throw cgemm::Error; a bad name is a bad case, not a planning error.
    throw CaseError("'" + what + "': " + e.what());
  }
}

/// Arrays that hold one item per dimension are refused beyond kMaxNdim items.
void check_rank(const Json& j, const std::string& what);

Shape as_shape(const Json& j, const std::string& what);            // [non-negative ints]
std::vector<int> as_dims(const Json& j, const std::string& what);  // [ints]
ContractingDims as_contracting_dims(const Json& j);                // [[lhs...], [rhs...]]
std::optional<std::string> as_resource(const Json& j, const std::string& what);  // null or name

/// null -> nullopt; array of null / "axis" / ["axis", ...] entries -> PartitionSpec.
std::optional<PartitionSpec> spec_from_json(const Json& j, const std::string& what);

}  // namespace cgemm::plan
