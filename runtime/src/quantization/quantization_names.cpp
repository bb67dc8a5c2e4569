// The quantization options' words (see quantization_names.hpp).
#include "cgemm/runtime/quantization_names.hpp"

#include "cgemm/core/error.hpp"

namespace cgemm {

ScalingMode parse_scaling_option(const std::string& text) {
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (text == row.option) return row.mode;
  }
  throw Error("unknown scaling '" + text + "' (expected " + scaling_option_choices() + ")");
}

std::string scaling_option_name(ScalingMode m) {
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (m == row.mode) return std::string(row.option);
  }
  return "none";
}

std::string scaling_option_choices(bool with_none) {
  std::string out;
  size_t count = 0;
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (with_none || is_quantized(row.mode)) ++count;
  }
  size_t i = 0;
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (!with_none && !is_quantized(row.mode)) continue;
    if (i > 0) out += i + 1 == count ? " or " : ", ";
    out += row.option;
    ++i;
  }
  return out;
}

DType parse_fp8_format(const std::string& text) {
  if (text == "e4m3") return DType::kFloat8E4M3;
  if (text == "e5m2") return DType::kFloat8E5M2;
  throw Error("unknown FP8 format '" + text + "' (expected e4m3 or e5m2)");
}

std::string fp8_format_name(DType t) { return t == DType::kFloat8E5M2 ? "e5m2" : "e4m3"; }

}  // namespace cgemm
