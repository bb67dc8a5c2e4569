#include "cgemm/gemm/scaling_recipe.hpp"

#include <cmath>
#include <string>

#include "cgemm/core/error.hpp"
#include "cgemm/core/float8.hpp"

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
  if (recipe.amax_history_len < 1 || recipe.amax_history_len > kMaxAmaxHistoryLen) {
    throw Error("amax_history_len must be in [1, 2^23], got " +
                std::to_string(recipe.amax_history_len));
  }
  if (fmt != DType::kFloat8E4M3 && fmt != DType::kFloat8E5M2) {
    throw Error("delayed scaling: format must be float8_e4m3fn or float8_e5m2, got " +
                std::string(dtype_name(fmt)));
  }
  state_.assign(
      static_cast<size_t>(ScaleStateLayout::floats(static_cast<int>(recipe.amax_history_len))),
      0.0f);
  state_[ScaleStateLayout::kScale] = 1.0f;
  state_[ScaleStateLayout::kScaleInv] = 1.0f;
}

TensorScale AmaxHistory::scale() const {
  return {state_[ScaleStateLayout::kScale], state_[ScaleStateLayout::kScaleInv]};
}

void AmaxHistory::push(float step_amax) {
  numeric::update_delayed_scale(state_.data(), step_amax,
                                static_cast<int>(recipe_.amax_history_len),
                                recipe_.amax_compute_algo, numeric::fp8_max(fmt_), recipe_.margin);
  ++steps_;
}

std::vector<float> AmaxHistory::window() const {
  const int64_t len = recipe_.amax_history_len;
  const float* ring = state_.data() + ScaleStateLayout::kHistory;
  std::vector<float> out;
  out.reserve(static_cast<size_t>(len));
  for (int64_t k = 1; k <= len; ++k) {
    out.push_back(k <= steps_ ? ring[((steps_ - k) % len + len) % len] : 0.0f);
  }
  return out;
}

}  // namespace cgemm::quant
