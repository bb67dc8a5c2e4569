#include "cgemm/core/collective_op.hpp"

#include <array>
#include <string>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

constexpr std::array<std::pair<CollectiveOp, std::string_view>, 3> kCollectives{{
    {CollectiveOp::kNone, "none"},
    {CollectiveOp::kAllGather, "all_gather"},
    {CollectiveOp::kReduceScatter, "reduce_scatter"},
}};

std::string known_collectives() {
  std::string out;
  for (const auto& entry : kCollectives) {
    if (!out.empty()) out += ", ";
    out += entry.second;
  }
  return out;
}

}  // namespace

std::string_view collective_name(CollectiveOp op) {
  for (const auto& [o, name] : kCollectives) {
    if (o == op) return name;
  }
  return "unknown";
}

CollectiveOp parse_collective(std::string_view name) {
  for (const auto& [o, n] : kCollectives) {
    if (n == name) return o;
  }
  throw Error("unknown collective '" + std::string(name) + "' (known: " + known_collectives() +
              ")");
}

}  // namespace cgemm
