#pragma once
// The state of Transformer Engine's DelayedScaling recipe for one tensor: a rolling window of
// the last amax_history_len amaxes and the scale the next step uses (TE's defaults: 1024, "max",
// margin 0; the first step uses scale 1).

#include <cstdint>
#include <string_view>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/gemm/quantize.hpp"
#include "cgemm/gemm/quantize_task.hpp"

namespace cgemm::quant {

/// How the next scale's amax is read from the window: its maximum, or the latest entry
/// (quantize_task.hpp's AmaxAlgo, the runtime's).
using AmaxComputeAlgo = AmaxAlgo;

/// "max" | "most_recent"; throws cgemm::Error naming the value.
AmaxComputeAlgo parse_amax_compute_algo(std::string_view name);
std::string_view amax_compute_algo_name(AmaxComputeAlgo algo);

struct DelayedScalingRecipe {
  int64_t amax_history_len = 1024;
  AmaxComputeAlgo amax_compute_algo = AmaxComputeAlgo::kMax;
  int margin = 0;
};

class AmaxHistory {
 public:
  /// `fmt` is the FP8 format quantized to (its fp8_max enters the scale). Throws cgemm::Error
  /// when amax_history_len < 1 or fmt is not kFloat8E4M3/kFloat8E5M2.
  AmaxHistory(DType fmt, DelayedScalingRecipe recipe = {});

  /// The scale of the current step: 1 before the first push.
  TensorScale scale() const;
  /// Records the amax the current step measured (over the global tensor) and computes the next
  /// step's scale: scale_from_amax(window amax, fmt, margin, previous scale), where the window is
  /// the last amax_history_len pushes (entries not yet pushed count as 0, as TE's zero-filled
  /// history) and its amax is their maximum (a NaN in the window gives NaN, which keeps the
  /// scale, as jnp.max) or the latest push.
  void push(float step_amax);
  /// The pushes so far (all steps).
  int64_t steps() const { return steps_; }
  /// The window, most recent first, amax_history_len entries (0 where nothing was pushed).
  std::vector<float> window() const;
  const DelayedScalingRecipe& recipe() const { return recipe_; }

 private:
  DType fmt_;
  DelayedScalingRecipe recipe_;
  // quantize_task.hpp's ScaleStateLayout, updated by numeric::update_delayed_scale: the same
  // function both backends run, so this class is the runtime's delayed scaling on the host.
  std::vector<float> state_;
  int64_t steps_ = 0;
};

}  // namespace cgemm::quant
