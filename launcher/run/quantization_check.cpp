#include "quantization_check.hpp"

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/watchdog.hpp"

namespace cgemm::launcher {

namespace {

GemmDesc unquantized(GemmDesc d) {
  d.quantization = QuantizationDesc{};
  d.name += " unquantized";
  return d;
}

int64_t out_count(const GemmPlan& p) { return num_elements(p.out_local()); }

}  // namespace

double quantization_bound(const QuantizationDesc& q) {
  if (is_nvfp4(q.mode)) return 0.25;
  const bool e5m2 = q.lhs_format == DType::kFloat8E5M2 || q.rhs_format == DType::kFloat8E5M2;
  return e5m2 ? 0.12 : 0.06;
}

Tolerance quantization_tolerance(const QuantizationDesc& q) {
  // TE's FP8 tolerances; FP4 (one mantissa bit) is held to wider ones of cgemm's choosing.
  return is_nvfp4(q.mode) ? Tolerance{0.5, 1.5} : tolerance_for(DType::kFloat8E4M3);
}

QuantizationCheck::QuantizationCheck(Context& ctx, const GemmPlan& quantized, double input_std)
    : be_(ctx.backend()),
      plan_(std::make_unique<GemmPlan>(ctx, unquantized(quantized.desc()))),
      quantization_(quantized.desc().quantization),
      ref_(be_, static_cast<size_t>(out_count(quantized)) * dtype_size(quantized.desc().out_dtype)),
      count_(out_count(quantized)),
      unit_(input_std * input_std *
            std::sqrt(static_cast<double>(quantized.desc().lhs_shape.back()))) {}

void QuantizationCheck::round(const void* lhs, const void* rhs, const void* bias, const void* out) {
  const DType t = plan_->desc().out_dtype;
  be_.fill_nan(ref_.p, t, count_);
  plan_->execute_sequential(lhs, rhs, bias, ref_.p);
  be_.synchronize();
  const size_t bytes = static_cast<size_t>(count_) * dtype_size(t);
  std::vector<char> h_out(bytes), h_ref(bytes);
  be_.copy_to_host(h_out.data(), out, bytes);
  be_.copy_to_host(h_ref.data(), ref_.p, bytes);
  // In units of the output's standard deviation, as TE's tests see their unit-variance outputs.
  std::vector<float> o(static_cast<size_t>(count_)), r(static_cast<size_t>(count_));
  convert_to_float(h_out.data(), t, o.data(), count_);
  convert_to_float(h_ref.data(), t, r.data(), count_);
  const auto unit = static_cast<float>(unit_);
  for (size_t i = 0; i < o.size(); ++i) {
    if (std::isfinite(r[i])) max_ref_ = std::max(max_ref_, static_cast<double>(std::fabs(r[i])));
    o[i] /= unit;
    r[i] /= unit;
  }
  CheckStats round =
      compare(o.data(), r.data(), DType::kFloat32, count_, quantization_tolerance(quantization_));
  round.max_abs *= unit_;  // reported in the output's own unit
  stats_.merge(round);
}

bool QuantizationCheck::verdict(nlohmann::json& report, std::string& line) const {
  int64_t counts[2] = {stats_.compared, stats_.failures};
  double maxes[2] = {stats_.max_abs, max_ref_};
  {
    const watchdog::WaitScope wait("the other ranks' quantization check of GEMM '" +
                                   plan_->desc().name + "'");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Allreduce(quantization check counts)");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, maxes, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce(quantization check errors)");
  }
  const double bound = quantization_bound(quantization_);
  const double rel = maxes[1] > 0 ? maxes[0] / maxes[1] : (maxes[0] > 0 ? INFINITY : 0.0);
  const bool pass = counts[1] == 0 && counts[0] > 0 && rel <= bound;
  const Tolerance tol = quantization_tolerance(quantization_);
  report["quantization_check"] = {{"compared", counts[0]},     {"failures", counts[1]},
                                  {"max_abs_error", maxes[0]}, {"max_abs_ref", maxes[1]},
                                  {"relative_error", rel},     {"relative_bound", bound},
                                  {"rtol", tol.rtol},          {"atol", tol.atol},
                                  {"error_unit", unit_},       {"passed", pass}};
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "quantization check %s against the unquantized GEMM: %lld elements, %lld "
                "failures (rtol %g, atol %g x the output's std %.3g), max |err| / max |ref| = "
                "%.3g (bound %g)",
                pass ? "PASSED" : "FAILED", static_cast<long long>(counts[0]),
                static_cast<long long>(counts[1]), tol.rtol, tol.atol, unit_, rel, bound);
  line = buf;
  return pass;
}

}  // namespace cgemm::launcher
