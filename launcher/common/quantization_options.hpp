#pragma once
// The quantization options (GemmDesc::quantization, plan_description.hpp) as option rows, for
// any config that holds a QuantizationDesc named `quantization` (cgemm-run, cgemm-bench):
// scaling, lhs_format, rhs_format, amax_history_len, amax_compute_algo, margin. The words of
// scaling and the formats are cgemm/runtime/quantization_names.hpp's.

#include <ostream>
#include <string>
#include <vector>

#include "cgemm/gemm/scaling_recipe.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "cgemm/runtime/quantization_names.hpp"
#include "option_table.hpp"

namespace cgemm::launcher {

/// The rows, for Config with a `QuantizationDesc quantization` member.
template <typename Config>
std::vector<OptionRow<Config>> quantization_rows() {
  namespace po = boost::program_options;
  using Row = OptionRow<Config>;
  using G = OptionGroup;
  std::vector<Row> rows;
  const auto text_row = [&](std::string name, std::string help, auto get, auto set) {
    Row row{name, G::kProblem, std::move(help), "", true, Sweep::kYes, {}, {}, {}};
    row.value = [get](const Config& d) {
      return po::value<std::string>()->value_name("X")->default_value(get(d.quantization));
    };
    row.read = [name, set](const OptionReader& r, Config& c) {
      const auto text = r.get<std::string>(name);
      try {
        set(c.quantization, text);
      } catch (const Error& e) {
        r.fail(name, text, e.what());
      }
    };
    row.ini = [name, get](std::ostream& out, const Config& c) {
      out << name << " = " << get(c.quantization) << "\n";
    };
    rows.push_back(std::move(row));
  };
  text_row(
      "scaling",
      "quantize x and w on every call and run the GEMM on the quantized copies, as Transformer "
      "Engine's recipes: none | delayed (per-tensor FP8, scale from the amax history of earlier "
      "calls) | current (per-tensor FP8, scale from this call's amax) | mxfp8 (E8M0 scale per 32 "
      "elements) | nvfp4 | nvfp4_2d (FP4 with E4M3 scales per 16 elements, 16 x 16 tiles for w; "
      "no collective). Per-tensor amaxes are max-reduced over every rank, so the quantized "
      "values do not depend on the mesh. mxfp8 and nvfp4 run on the CPU backend's emulation "
      "only (the CUDA backend has no block-scaling kernels yet, on any GPU)",
      [](const QuantizationDesc& q) { return scaling_option_name(q.mode); },
      [](QuantizationDesc& q, const std::string& t) { q.mode = parse_scaling_option(t); });
  for (const bool lhs : {true, false}) {
    text_row(
        lhs ? "lhs_format" : "rhs_format",
        std::string("FP8 format of the quantized ") + (lhs ? "x (lhs)" : "w (rhs)") +
            ": e4m3 | e5m2; e5m2 x e5m2 is refused (gemm.py's FP8 pairs); ignored by nvfp4",
        [lhs](const QuantizationDesc& q) {
          return fp8_format_name(lhs ? q.lhs_format : q.rhs_format);
        },
        [lhs](QuantizationDesc& q, const std::string& t) {
          (lhs ? q.lhs_format : q.rhs_format) = parse_fp8_format(t);
        });
  }
  const std::string history_bound =
      "must be 1 to " + std::to_string(kMaxAmaxHistoryLen) + " (2^23) [calls]";
  Row history = number_row<Config, int>(
      "amax_history_len", G::kProblem, "N", "calls",
      "delayed scaling: amaxes of the last N calls the scale is taken from, 1 to 2^23 (TE's "
      "DelayedScaling default 1024); the history runs across the timed iterations and the "
      "check rounds",
      [](auto& c) -> auto& { return c.quantization.recipe.amax_history_len; }, 1, history_bound);
  history.read = [history_bound](const OptionReader& r, Config& c) {
    const int n = r.get<int>("amax_history_len");
    if (n < 1 || n > kMaxAmaxHistoryLen) {
      r.fail("amax_history_len", std::to_string(n), history_bound);
    }
    c.quantization.recipe.amax_history_len = n;
  };
  rows.push_back(std::move(history));
  text_row(
      "amax_compute_algo",
      "delayed scaling: max (of the history) | most_recent (the last call's amax)",
      [](const QuantizationDesc& q) {
        return std::string(quant::amax_compute_algo_name(q.recipe.algo));
      },
      [](QuantizationDesc& q, const std::string& t) {
        q.recipe.algo = quant::parse_amax_compute_algo(t);
      });
  Row margin = number_row<Config, int>(
      "margin", G::kProblem, "N", "powers of 2",
      "delayed and current scaling: scale = fp8_max / amax / 2^margin, 0 to 127",
      [](auto& c) -> auto& { return c.quantization.recipe.margin; }, 0,
      "must be 0 to 127 [powers of 2]");
  margin.read = [](const OptionReader& r, Config& c) {
    const int m = r.get<int>("margin");
    if (m < 0 || m > 127) r.fail("margin", std::to_string(m), "must be 0 to 127 [powers of 2]");
    c.quantization.recipe.margin = m;
  };
  rows.push_back(std::move(margin));
  return rows;
}

}  // namespace cgemm::launcher
