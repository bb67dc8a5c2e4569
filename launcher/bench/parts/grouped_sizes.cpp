// The group-size rule of cgemm-bench --parts grouped (grouped_sizes.hpp).

#include "grouped_sizes.hpp"

#include <limits>

#include "cgemm/core/error.hpp"

namespace cgemm::launcher::parts {

std::string group_skew_text(GroupSkew skew, int64_t empty) {
  return skew == GroupSkew::kUniform ? "uniform" : "skewed, " + std::to_string(empty) + " empty";
}

std::vector<int32_t> moe_group_sizes(int64_t tokens, int64_t groups, GroupSkew skew,
                                     int64_t empty) {
  const std::string what = "group sizes of " + std::to_string(tokens) + " tokens over " +
                           std::to_string(groups) + " groups (" + group_skew_text(skew, empty) +
                           ")";
  if (groups < 1 || tokens < 0 || tokens > std::numeric_limits<int32_t>::max()) {
    throw Error(what + ": needs G >= 1 and 0 <= tokens <= 2^31 - 1");
  }
  std::vector<int32_t> sizes(static_cast<size_t>(groups), 0);
  if (skew == GroupSkew::kUniform) {
    for (int64_t g = 0; g < groups; ++g) {
      sizes[static_cast<size_t>(g)] = static_cast<int32_t>(tokens / groups + (g < tokens % groups));
    }
    return sizes;
  }
  if (empty < 0 || empty >= groups || (empty > 0 && groups % empty != 0)) {
    throw Error(what + ": the empty groups must be fewer than G and divide it");
  }
  const int64_t stride = empty > 0 ? groups / empty : groups + 1;  // no group empty for E = 0
  const int64_t active = groups - empty;
  if (tokens < active) throw Error(what + ": fewer tokens than non-empty groups");
  std::vector<int64_t> weight;
  int64_t total = 0;
  for (int64_t r = 0; r < active; ++r) {
    weight.push_back((int64_t{1} << 20) / (r + 1));
    total += weight.back();
  }
  // (tokens - A) * w_r < 2^31 * 2^20: no overflow.
  std::vector<int64_t> rows;
  int64_t used = 0;
  for (int64_t r = 0; r < active; ++r) {
    rows.push_back(1 + (tokens - active) * weight[static_cast<size_t>(r)] / total);
    used += rows.back();
  }
  const int64_t left = tokens - used;
  if (left < 0 || left >= active)
    throw Error(what + ": internal: " + std::to_string(left) + " left");
  for (int64_t r = 0; r < left; ++r) ++rows[static_cast<size_t>(r)];
  int64_t r = 0;
  for (int64_t g = 0; g < groups; ++g) {
    if (g % stride == stride - 1) continue;  // empty
    sizes[static_cast<size_t>(g)] = static_cast<int32_t>(rows[static_cast<size_t>(r++)]);
  }
  return sizes;
}

}  // namespace cgemm::launcher::parts
