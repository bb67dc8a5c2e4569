#include "cgemm/sharding/scaling_mode.hpp"

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

std::string known_scaling_modes() {
  std::string out;
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (!out.empty()) out += ", ";
    out += row.planner_name;
  }
  return out;
}

}  // namespace

std::string_view scaling_mode_name(ScalingMode m) {
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (row.mode == m) return row.planner_name;
  }
  return "unknown";
}

ScalingMode parse_scaling_mode(std::string_view name) {
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (row.planner_name == name) return row.mode;
  }
  throw Error("unknown scaling_mode '" + std::string(name) + "' (known: " + known_scaling_modes() +
              ")");
}

}  // namespace cgemm
