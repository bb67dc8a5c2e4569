#pragma once
// Transformer Engine's ScalingMode as the planner names it. The mode, its predicates and
// everything else about it are rows of core's table (cgemm/core/scaling_modes.hpp); this is the
// planner's spelling of them ("delayed_tensor_scaling", as gemm.py writes them).

#include <string_view>

#include "cgemm/core/scaling_modes.hpp"

namespace cgemm {

/// The row's planner_name: "no_scaling", "delayed_tensor_scaling", ...
std::string_view scaling_mode_name(ScalingMode m);
/// Throws cgemm::Error naming the value and the known names.
ScalingMode parse_scaling_mode(std::string_view name);

}  // namespace cgemm
