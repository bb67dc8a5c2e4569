#pragma once
// The quantization options' words (GemmDesc::quantization, plan_description.hpp) as cgemm-run
// and cgemm-bench spell them (--scaling, --lhs_format, --rhs_format), shared with the C API's
// cgemm_plan_options so one notation names a recipe everywhere.

#include <string>

#include "cgemm/core/dtype.hpp"
#include "cgemm/sharding/scaling_mode.hpp"

namespace cgemm {

/// The words are the option column of core's table (cgemm/core/scaling_modes.hpp): "none" |
/// "delayed" | "current" | "mxfp8" | "nvfp4" | "nvfp4_2d" (Transformer Engine's
/// DELAYED_TENSOR_SCALING, CURRENT_TENSOR_SCALING, MXFP8_1D_SCALING, NVFP4_1D_SCALING,
/// NVFP4_2D_SCALING). Throws cgemm::Error naming the value and the choices.
ScalingMode parse_scaling_option(const std::string& text);
std::string scaling_option_name(ScalingMode m);
/// The words in the table's order, for messages: "none, delayed, current, mxfp8, nvfp4 or
/// nvfp4_2d" (without "none" when !with_none).
std::string scaling_option_choices(bool with_none = true);
/// "e4m3" | "e5m2" (float8_e4m3fn, float8_e5m2). Throws cgemm::Error naming the value.
DType parse_fp8_format(const std::string& text);
std::string fp8_format_name(DType t);

}  // namespace cgemm
