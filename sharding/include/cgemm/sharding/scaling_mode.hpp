#pragma once
// Transformer Engine's ScalingMode. Planner vocabulary only (the spec inference and shape
// checks read it; nothing below the planner does), so it lives here and not in core/.

#include <string_view>

namespace cgemm {

/// Transformer Engine's ScalingMode; predicates as in gemm.py's ScalingMode methods.
enum class ScalingMode {
  kNoScaling,
  kDelayedTensorScaling,
  kCurrentTensorScaling,
  kMxfp8_1d,
  kNvfp4_1d,
  kNvfp4_2d
};
std::string_view scaling_mode_name(ScalingMode m);  // "no_scaling", "delayed_tensor_scaling", ...
/// Throws cgemm::Error naming the value and the known names.
ScalingMode parse_scaling_mode(std::string_view name);
bool is_tensor_scaling(ScalingMode m);    // delayed or current
bool is_nvfp4(ScalingMode m);             // nvfp4_1d or nvfp4_2d
bool is_1d_block_scaling(ScalingMode m);  // mxfp8_1d, nvfp4_1d, nvfp4_2d
bool is_mxfp8(ScalingMode m);             // mxfp8_1d

}  // namespace cgemm
