#include "cgemm/sharding/scaling_mode.hpp"

#include <array>
#include <string>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

constexpr std::array<std::pair<ScalingMode, std::string_view>, 6> kScalingModes{{
    {ScalingMode::kNoScaling, "no_scaling"},
    {ScalingMode::kDelayedTensorScaling, "delayed_tensor_scaling"},
    {ScalingMode::kCurrentTensorScaling, "current_tensor_scaling"},
    {ScalingMode::kMxfp8_1d, "mxfp8_1d_scaling"},
    {ScalingMode::kNvfp4_1d, "nvfp4_1d_scaling"},
    {ScalingMode::kNvfp4_2d, "nvfp4_2d_scaling"},
}};

std::string known_scaling_modes() {
  std::string out;
  for (const auto& entry : kScalingModes) {
    if (!out.empty()) out += ", ";
    out += entry.second;
  }
  return out;
}

}  // namespace

std::string_view scaling_mode_name(ScalingMode m) {
  for (const auto& [mode, name] : kScalingModes) {
    if (mode == m) return name;
  }
  return "unknown";
}

ScalingMode parse_scaling_mode(std::string_view name) {
  for (const auto& [mode, n] : kScalingModes) {
    if (n == name) return mode;
  }
  throw Error("unknown scaling_mode '" + std::string(name) + "' (known: " + known_scaling_modes() +
              ")");
}

bool is_tensor_scaling(ScalingMode m) {
  return m == ScalingMode::kDelayedTensorScaling || m == ScalingMode::kCurrentTensorScaling;
}

bool is_nvfp4(ScalingMode m) { return m == ScalingMode::kNvfp4_1d || m == ScalingMode::kNvfp4_2d; }

// Transformer Engine counts NVFP4 2D as 1D block scaling too (its scale-inverse layout is
// per-row blocks), so the 2D mode shards its scales like the operand.
bool is_1d_block_scaling(ScalingMode m) { return m == ScalingMode::kMxfp8_1d || is_nvfp4(m); }

bool is_mxfp8(ScalingMode m) { return m == ScalingMode::kMxfp8_1d; }

}  // namespace cgemm
