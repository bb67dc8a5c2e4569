#pragma once
// Python sequence indexing, private to the planner: gemm.py indexes tuples with sanitized
// dims that are not range-checked, so a dim in [-len, len) wraps like Python and anything
// else is the IndexError that makes the Python raise.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/core/error.hpp"

namespace cgemm::detail {

template <typename T>
const T& py_at(const std::vector<T>& v, int64_t i, const std::string& what) {
  const auto n = static_cast<int64_t>(v.size());
  if (i < -n || i >= n) {
    throw PlanError(what + ": dimension " + std::to_string(i) + " is out of range for " +
                    std::to_string(n) + " dimensions");
  }
  return v[static_cast<size_t>(i < 0 ? i + n : i)];
}

}  // namespace cgemm::detail
