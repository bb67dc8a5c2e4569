#pragma once
// The check of a quantized GEMM (scaling != none) against the same GEMM unquantized: the
// overlapped quantized output against the sequential path of the unquantized plan on the same
// inputs (CPU backend: the fp64 GEMM of the inputs, rounded once to the output dtype), by
// Transformer Engine's FP8 tolerances (rtol 0.125, atol 0.625) and by a relative bound that can
// fail whatever the input scale: max |out - ref| / max |ref| below a figure per mode
// (quantization_bound). TE's tests draw GEMM inputs whose output has unit variance (x and w
// normal, divided by sqrt(K)); cgemm-run draws both with --std, so the output's standard
// deviation is std^2 sqrt(K) and the absolute errors are compared in that unit: atol 0.625 of
// it. The overlapped-against-sequential check stays as tight as for any
// dtype: both paths multiply the same quantized operands.

#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include "cgemm/runtime/plan.hpp"
#include "common/check.hpp"
#include "common/job.hpp"

namespace cgemm::launcher {

/// The relative bound of a mode (max |err| / max |ref|, err against the unquantized GEMM, inputs
/// normal): e4m3 x e4m3 (per-tensor or MXFP8) 0.06, with e5m2 0.12, NVFP4 0.25. Measured on the
/// CPU backend at K = 256: 0.040-0.042 for e4m3 (tensor and MXFP8), 0.136 for NVFP4.
double quantization_bound(const QuantizationDesc& q);
/// The elementwise tolerance: TE's FP8 one (rtol 0.125, atol 0.625), NVFP4 rtol 0.5, atol 1.5
/// (atol in units of the output's standard deviation, see above).
Tolerance quantization_tolerance(const QuantizationDesc& q);

class QuantizationCheck {
 public:
  /// Plans `quantized`'s GEMM unquantized on the same context (collective over the job, as
  /// any plan) and allocates its output.
  QuantizationCheck(Context& ctx, const GemmPlan& quantized, double input_std);
  /// Runs the unquantized sequential path on the inputs `quantized` just ran on and folds the
  /// comparison of `out` (the quantized result, backend memory) into this rank's stats.
  void round(const void* lhs, const void* rhs, const void* bias, const void* out);
  /// Reduces the stats over the job (collective) and says PASSED / FAILED in one line.
  bool verdict(nlohmann::json& report, std::string& line) const;

 private:
  Backend& be_;
  std::unique_ptr<GemmPlan> plan_;
  QuantizationDesc quantization_;
  Buffer ref_;
  int64_t count_ = 0;
  CheckStats stats_;
  double max_ref_ = 0.0;  // max |ref| over finite elements
  double unit_ = 1.0;     // the output's standard deviation: errors are compared in this unit
};

}  // namespace cgemm::launcher
