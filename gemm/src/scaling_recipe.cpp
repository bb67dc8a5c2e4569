#include "cgemm/gemm/scaling_recipe.hpp"

#include <cmath>
#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm::quant {

AmaxComputeAlgo parse_amax_compute_algo(std::string_view name) {
  if (name == "max") return AmaxComputeAlgo::kMax;
  if (name == "most_recent") return AmaxComputeAlgo::kMostRecent;
  throw Error("amax_compute_algo '" + std::string(name) + "' is not one of max, most_recent");
}

std::string_view amax_compute_algo_name(AmaxComputeAlgo algo) {
  return algo == AmaxComputeAlgo::kMax ? "max" : "most_recent";
}

AmaxHistory::AmaxHistory(DType fmt, DelayedScalingRecipe recipe) : fmt_(fmt), recipe_(recipe) {
  if (recipe.amax_history_len < 1) {
    throw Error("amax_history_len must be >= 1, got " + std::to_string(recipe.amax_history_len));
  }
  if (fmt != DType::kFloat8E4M3 && fmt != DType::kFloat8E5M2) {
    throw Error("delayed scaling: format must be float8_e4m3fn or float8_e5m2, got " +
                std::string(dtype_name(fmt)));
  }
  ring_.assign(static_cast<size_t>(recipe.amax_history_len), 0.0f);
}

void AmaxHistory::push(float step_amax) {
  const int64_t len = recipe_.amax_history_len;
  ring_[static_cast<size_t>(steps_ % len)] = step_amax;
  ++steps_;
  float window_amax = step_amax;
  if (recipe_.amax_compute_algo == AmaxComputeAlgo::kMax) {
    // A NaN anywhere in the window makes the maximum NaN (as jnp.max), which keeps the scale.
    for (float v : ring_) {
      if (std::isnan(v) || std::isnan(window_amax)) {
        window_amax = NAN;
        break;
      }
      if (v > window_amax) window_amax = v;
    }
  }
  scale_ = scale_from_amax(window_amax, fmt_, recipe_.margin, scale_.scale);
}

std::vector<float> AmaxHistory::window() const {
  const int64_t len = recipe_.amax_history_len;
  std::vector<float> out;
  out.reserve(ring_.size());
  for (int64_t k = 1; k <= len; ++k) {
    out.push_back(ring_[static_cast<size_t>(((steps_ - k) % len + len) % len)]);
  }
  return out;
}

}  // namespace cgemm::quant
