// The quantization options' words (see quantization_names.hpp).
#include "cgemm/runtime/quantization_names.hpp"

#include <array>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

// The option's words and the modes they name, in --help order.
constexpr std::array<std::pair<const char*, ScalingMode>, 6> kScalings{{
    {"none", ScalingMode::kNoScaling},
    {"delayed", ScalingMode::kDelayedTensorScaling},
    {"current", ScalingMode::kCurrentTensorScaling},
    {"mxfp8", ScalingMode::kMxfp8_1d},
    {"nvfp4", ScalingMode::kNvfp4_1d},
    {"nvfp4_2d", ScalingMode::kNvfp4_2d},
}};

}  // namespace

ScalingMode parse_scaling_option(const std::string& text) {
  for (const auto& [name, mode] : kScalings) {
    if (text == name) return mode;
  }
  throw Error("unknown scaling '" + text +
              "' (expected none, delayed, current, mxfp8, nvfp4 or nvfp4_2d)");
}

std::string scaling_option_name(ScalingMode m) {
  for (const auto& [name, mode] : kScalings) {
    if (m == mode) return name;
  }
  return "none";
}

DType parse_fp8_format(const std::string& text) {
  if (text == "e4m3") return DType::kFloat8E4M3;
  if (text == "e5m2") return DType::kFloat8E5M2;
  throw Error("unknown FP8 format '" + text + "' (expected e4m3 or e5m2)");
}

std::string fp8_format_name(DType t) { return t == DType::kFloat8E5M2 ? "e5m2" : "e4m3"; }

}  // namespace cgemm
