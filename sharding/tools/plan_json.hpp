#pragma once
// What cgemm-plan's schema and line protocol share: the JSON type, the resource limits and
// the error of an unusable case (the case contract is tests/data/PLANNER_SCHEMA.md).

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cgemm/core/error.hpp"

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

/// "the ndim limit (1024)", "the depth limit (256 levels)": how a message names a limit.
inline std::string cap_name(const char* what, uint64_t limit, const char* unit = "") {
  return std::string("the ") + what + " limit (" + std::to_string(limit) + (unit[0] ? " " : "") +
         unit + ")";
}

/// A case that is JSON but not usable: missing or ill-typed field, unknown op or name.
class CaseError : public Error {
 public:
  using Error::Error;
};

}  // namespace cgemm::plan
