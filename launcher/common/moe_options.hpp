#pragma once
// cgemm-run's MoE expert block experiment (moe_block.hpp): its options as option rows, for a
// config holding `Experiment experiment` and `MoeOptions moe` (cgemm-run's RunConfig).
// experiment = moe selects it; the moe_* rows size it. The rows are refused in sweeps (the
// MoE experiment runs one experiment per job).

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "moe_router.hpp"
#include "option_table.hpp"

namespace cgemm::launcher {

/// What a cgemm-run job runs.
enum class Experiment {
  kCollectiveGemm,  // the block of overlapped collective GEMMs (the gemm rows)
  kMoe,             // the MoE expert block: two grouped GEMMs on every rank (moe_block.hpp)
};

/// "collective_gemm" | "moe".
const char* experiment_name(Experiment e);
/// The inverse; throws cgemm::Error naming the value and the choices.
Experiment parse_experiment(const std::string& text);

/// The MoE block: x [tokens, hidden] sorted by expert, up = x @ w_up[g] ([experts, hidden,
/// ffn]) -> [tokens, ffn], down = up @ w_down[g] ([experts, ffn, hidden]) -> [tokens, hidden].
/// The default runs on CPUs in well under a second.
struct MoeOptions {
  int64_t tokens = 512;  // T: rows of x, split over the experts by the router
  int64_t experts = 8;   // G: groups of each grouped GEMM
  int64_t hidden = 64;   // H: the model's hidden size
  int64_t ffn = 96;      // F: the experts' FFN size
  MoeRouter router = MoeRouter::kUniform;
  int64_t empty_groups = 0;  // experts the router leaves without tokens
  int64_t check_rows = 0;    // rows checked per group; 0: all
};

/// The rows: experiment, moe_tokens, moe_experts, moe_hidden, moe_ffn, moe_router,
/// moe_empty_groups (Problem) and moe_check_rows (Run).
template <typename Config>
std::vector<OptionRow<Config>> moe_rows() {
  namespace po = boost::program_options;
  using Row = OptionRow<Config>;
  using G = OptionGroup;
  std::vector<Row> rows;
  const auto choice = [&](std::string name, std::string help, auto get, auto set) {
    Row row{name, G::kProblem, std::move(help), "", true, Sweep::kRefused, {}, {}, {}};
    row.value = [get](const Config& d) {
      return po::value<std::string>()->value_name("X")->default_value(get(d));
    };
    row.read = [name, set](const OptionReader& r, Config& c) {
      const auto text = r.get<std::string>(name);
      try {
        set(c, text);
      } catch (const Error& e) {
        r.fail(name, text, e.what());
      }
    };
    row.ini = [name, get](std::ostream& out, const Config& c) {
      out << name << " = " << get(c) << "\n";
    };
    rows.push_back(std::move(row));
  };
  choice(
      "experiment",
      "what the job runs: collective_gemm (the block of overlapped collective GEMMs of the gemm "
      "options) | moe (the MoE expert block of the moe_* options: two grouped GEMMs on every "
      "rank, no collective)",
      [](const Config& c) { return std::string(experiment_name(c.experiment)); },
      [](Config& c, const std::string& t) { c.experiment = parse_experiment(t); });
  // Sizes: int32 group sizes bound the tokens; the others are bounded so that element counts
  // stay far from int64's end (checked again, as bytes, when the block is planned).
  constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMaxDim = int64_t{1} << 24;
  const auto size = [&](std::string name, const char* value_name, std::string unit,
                        std::string help, auto field, int64_t min, int64_t max) {
    Row row = number_row<Config, int64_t>(name, G::kProblem, value_name, unit, std::move(help),
                                          field, min, "", Sweep::kRefused);
    row.read = [=](const OptionReader& r, Config& c) {
      const auto v = r.get<int64_t>(name);
      if (v < min || v > max) {
        r.fail(name, std::to_string(v),
               "must be " + std::to_string(min) + " to " + std::to_string(max) + " [" + unit + "]");
      }
      field(c) = v;
    };
    rows.push_back(std::move(row));
  };
  size(
      "moe_tokens", "T", "tokens",
      "experiment moe: tokens T, the rows of x [T, moe_hidden], split over the experts by "
      "moe_router (tokens already sorted by expert)",
      [](auto& c) -> auto& { return c.moe.tokens; }, 1, kMaxTokens);
  size(
      "moe_experts", "G", "experts", "experiment moe: experts G, the groups of each grouped GEMM",
      [](auto& c) -> auto& { return c.moe.experts; }, 1, int64_t{1} << 16);
  size(
      "moe_hidden", "H", "elements",
      "experiment moe: hidden size H: x [T, H], w_up [G, H, F], the block's output [T, H]",
      [](auto& c) -> auto& { return c.moe.hidden; }, 1, kMaxDim);
  size(
      "moe_ffn", "F", "elements",
      "experiment moe: the experts' FFN size F: the up projection's output [T, F], w_down "
      "[G, F, H]",
      [](auto& c) -> auto& { return c.moe.ffn; }, 1, kMaxDim);
  choice(
      "moe_router",
      "experiment moe: how the tokens split over the experts, drawn from seed: uniform (even "
      "split) | skewed (Zipf-like, weights 1/rank^1.2 in a seeded order) | one_group (every "
      "token in one seeded group); docs/MOE.md has the rules",
      [](const Config& c) { return std::string(moe_router_name(c.moe.router)); },
      [](Config& c, const std::string& t) { c.moe.router = parse_moe_router(t); });
  size(
      "moe_empty_groups", "E", "experts",
      "experiment moe: experts (chosen by seed) that get no tokens; uniform and skewed split "
      "the tokens over the others; less than moe_experts",
      [](auto& c) -> auto& { return c.moe.empty_groups; }, 0, int64_t{1} << 16);
  Row check_rows = number_row<Config, int64_t>(
      "moe_check_rows", G::kRun, "R", "rows per group",
      "experiment moe: rows of each group checked against the fp64 host reference (its first, "
      "last and evenly spaced between; every column); 0 = every row",
      [](auto& c) -> auto& { return c.moe.check_rows; }, 0, "must be 0 (every row) or more",
      Sweep::kRefused);
  rows.push_back(std::move(check_rows));
  return rows;
}

}  // namespace cgemm::launcher
