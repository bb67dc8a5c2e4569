// cgemm-run's options: its rows on top of the shared ones (shared_options.cpp), the checks
// that need several options (the GEMM block, the outputs) or the world size (resolve_mesh),
// and the resolved config as INI text.

#include "run_config.hpp"

#include "quantization_options.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <sstream>
#include <utility>

#include <boost/program_options.hpp>

#include "dry_run_limits.hpp"
#include "option_sweep.hpp"

namespace cgemm::launcher {

namespace po = boost::program_options;

namespace {

using Row = OptionRow<RunConfig>;
using G = OptionGroup;

// Parses the whole of `text` as an integer of type T; nullopt on anything else (sign for an
// unsigned T, trailing characters, overflow).
template <typename T>
std::optional<T> parse_integer(std::string_view text) {
  T value{};
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

GemmSpec parse_gemm_entry(const std::string& entry, const OptionReader& r) {
  std::istringstream in(entry);
  std::vector<std::string> tok;
  for (std::string t; in >> t;) tok.push_back(t);
  if (tok.size() != 4) {
    r.fail("gemm", entry,
           "malformed gemm entry: expected 'NAME COLLECTIVE HIDDEN_IN HIDDEN_OUT', e.g. "
           "'up_proj all_gather 768 3072' (" +
               std::to_string(tok.size()) + " fields given)");
  }
  GemmSpec g;
  g.name = tok[0];
  if (!std::all_of(g.name.begin(), g.name.end(), is_name_char)) {
    r.fail("gemm", entry,
           "malformed gemm entry: name '" + g.name +
               "' may only hold letters, digits, '_', '-' and '.'");
  }
  try {
    g.collective = parse_collective(tok[1]);
  } catch (const Error& e) {
    r.fail("gemm", entry, std::string("malformed gemm entry: ") + e.what());
  }
  const std::array<std::pair<const char*, int64_t*>, 2> dims{
      {{"hidden_in", &g.hidden_in}, {"hidden_out", &g.hidden_out}}};
  for (size_t i = 0; i < dims.size(); ++i) {
    const auto v = parse_integer<int64_t>(tok[2 + i]);
    if (!v || *v < 1) {
      r.fail("gemm", entry,
             std::string("malformed gemm entry: ") + dims[i].first + " '" + tok[2 + i] +
                 "' is not a positive integer [elements]");
    }
    *dims[i].second = *v;
  }
  return g;
}

// The single GEMM's options (--collective, --hidden_in, --hidden_out): checked by their rows,
// turned into the block by the gemm row.
int64_t read_hidden(const OptionReader& r, const std::string& name) {
  return r.at_least<int64_t>(name, 1, "must be at least 1 [elements]");
}

CollectiveOp read_collective(const OptionReader& r) {
  const auto text = r.get<std::string>("collective");
  try {
    return parse_collective(text);
  } catch (const Error& e) {
    r.fail("collective", text, e.what());
  }
}

// The block: the single GEMM when any of its options is on the command line or there are no
// gemm entries, else the entries.
void read_block(const OptionReader& r, RunConfig& cfg) {
  const bool single_on_cli = r.on_command_line("collective") || r.on_command_line("hidden_in") ||
                             r.on_command_line("hidden_out");
  if (single_on_cli && r.on_command_line("gemm")) {
    throw OptionError(
        "--gemm and --collective/--hidden_in/--hidden_out were all given on the command line: "
        "give either --gemm entries (a block) or the single GEMM's options, not both");
  }
  cfg.gemms.clear();
  if (single_on_cli || !r.has("gemm")) {
    const CollectiveOp collective = read_collective(r);
    cfg.gemms.push_back(GemmSpec{std::string(collective_name(collective)), collective,
                                 read_hidden(r, "hidden_in"), read_hidden(r, "hidden_out")});
    return;
  }
  for (const auto& entry : r.get<std::vector<std::string>>("gemm")) {
    GemmSpec g = parse_gemm_entry(entry, r);
    for (const auto& prev : cfg.gemms) {
      if (prev.name == g.name) {
        r.fail("gemm", entry,
               "duplicate gemm name '" + g.name +
                   "' (each GEMM of the block "
                   "needs its own name)");
      }
    }
    cfg.gemms.push_back(std::move(g));
  }
}

// A single GEMM named after its collective reads back from the scalar options; anything else
// is written as gemm entries.
void write_block(std::ostream& out, const RunConfig& cfg) {
  if (cfg.gemms.size() == 1 &&
      cfg.gemms.front().name == collective_name(cfg.gemms.front().collective)) {
    const GemmSpec& g = cfg.gemms.front();
    out << "collective = " << collective_name(g.collective) << "\n";
    out << "hidden_in = " << g.hidden_in << "\n";
    out << "hidden_out = " << g.hidden_out << "\n";
    return;
  }
  for (const auto& g : cfg.gemms) {
    out << "gemm = " << g.name << " " << collective_name(g.collective) << " " << g.hidden_in << " "
        << g.hidden_out << "\n";
  }
}

// The default of a single-GEMM option: the bare run's GEMM.
const GemmSpec& default_gemm(const RunConfig& d) { return d.gemms.front(); }

template <typename T, typename Field>
Row number(std::string name, G group, const char* value_name, std::string unit, std::string help,
           Field field, T min, std::string what, Sweep sweep = Sweep::kYes) {
  return number_row<RunConfig, T>(std::move(name), group, value_name, std::move(unit),
                                  std::move(help), field, min, std::move(what), sweep);
}

template <typename Field>
Row boolean(std::string name, G group, std::string help, Field field, Sweep sweep = Sweep::kYes) {
  return bool_row<RunConfig>(std::move(name), group, std::move(help), field, sweep);
}

template <typename Field>
Row path(std::string name, G group, std::string help, Field field) {
  return path_row<RunConfig>(std::move(name), group, "FILE", std::move(help), field);
}

std::vector<Row> own_rows() {
  std::vector<Row> rows;
  // Mesh
  Row tp = number<int>(
      "tp", G::kMesh, "N", "ranks",
      "tensor-parallel size: ranks of one TP group, over which the collectives run; "
      "0 = world size / dp",
      [](auto& c) -> auto& { return c.tp; }, 0,
      "must be 0 (world size / dp) or a positive number of ranks", Sweep::kRefused);
  tp.ini = [](std::ostream& out, const RunConfig& c) {
    out << "tp = " << c.tp << (c.tp == 0 ? "  # world size / dp" : "") << "\n";
  };
  rows.push_back(std::move(tp));
  rows.push_back(number<int>(
      "fsdp", G::kMesh, "N", "ranks",
      "fully sharded data-parallel size: ranks of one replica that split the batch and shard "
      "every weight, each GEMM gathering its weight over them as it runs (docs/FSDP.md); "
      "world = dp x fsdp x tp",
      [](auto& c) -> auto& { return c.fsdp; }, 1, "must be at least 1 [ranks]", Sweep::kRefused));

  // Problem: the experiment and the MoE block's sizes (moe_options.hpp), then the GEMM block.
  for (Row& r : moe_rows<RunConfig>()) rows.push_back(std::move(r));
  rows.push_back(number<int64_t>(
      "batch", G::kProblem, "N", "sequences", "global batch size B, split over dp",
      [](auto& c) -> auto& { return c.batch; }, 1, "must be at least 1 [sequences]"));
  rows.push_back(number<int64_t>(
      "seq_len", G::kProblem, "N", "tokens", "sequence length S, sharded over tp",
      [](auto& c) -> auto& { return c.seq_len; }, 1, "must be at least 1 [tokens]"));
  for (const char* hidden : {"hidden_in", "hidden_out"}) {
    const bool in = std::string_view(hidden) == "hidden_in";
    rows.push_back(Row{
        hidden,
        G::kProblem,
        in ? "hidden size K of the single GEMM (the contracting dim)"
           : "hidden size N of the single GEMM (the output dim)",
        "elements",
        true,
        Sweep::kYes,
        [in](const RunConfig& d) {
          const GemmSpec& g = default_gemm(d);
          return po::value<int64_t>()
              ->value_name(in ? "K" : "N")
              ->default_value(in ? g.hidden_in : g.hidden_out);
        },
        [name = std::string(hidden)](const OptionReader& r, RunConfig&) { read_hidden(r, name); },
        {}});  // written by the gemm row
  }
  rows.push_back(
      Row{"collective",
          G::kProblem,
          "collective of the single GEMM: none | all_gather (column-parallel, shards N) | "
          "reduce_scatter (row-parallel, shards K)",
          "",
          true,
          Sweep::kYes,
          [](const RunConfig& d) {
            return po::value<std::string>()->value_name("OP")->default_value(
                std::string(collective_name(default_gemm(d).collective)));
          },
          [](const OptionReader& r, RunConfig&) { read_collective(r); },
          {}});  // written by the gemm row
  rows.push_back(
      Row{"gemm", G::kProblem,
          "one GEMM of a block run in order, e.g. \"up_proj all_gather 768 3072\" (OP as for "
          "--collective, K and N in elements); repeat for more. The block is: the single GEMM "
          "of --collective/--hidden_in/--hidden_out when any of those is on the command line; "
          "else the gemm entries when there are any; else the single GEMM (named after its "
          "collective)",
          "", false, Sweep::kPlain,
          [](const RunConfig&) {
            return po::value<std::vector<std::string>>()->value_name("\"NAME OP K N\"");
          },
          read_block, write_block});
  rows.push_back(
      Row{"dtype", G::kProblem,
          "element type of x, w, bias and the output: bf16 | fp16 | fp32 (or bfloat16, "
          "float16, float32)",
          "", true, Sweep::kYes,
          [](const RunConfig& d) {
            // The short name the user types, not dtype_name's long one.
            const std::string text = d.dtype == DType::kFloat16   ? "fp16"
                                     : d.dtype == DType::kFloat32 ? "fp32"
                                                                  : "bf16";
            return po::value<std::string>()->value_name("T")->default_value(text);
          },
          [](const OptionReader& r, RunConfig& c) {
            // parse_dtype knows the FP8/FP4 types too; cgemm-run has no scaling options, so it
            // runs the unscaled ones only.
            const auto text = r.get<std::string>("dtype");
            constexpr std::array<std::string_view, 6> kRunDTypes{"bf16",     "fp16",    "fp32",
                                                                 "bfloat16", "float16", "float32"};
            if (std::find(kRunDTypes.begin(), kRunDTypes.end(), text) == kRunDTypes.end()) {
              r.fail("dtype", text,
                     "unknown dtype '" + text +
                         "' (cgemm-run runs bf16, fp16, fp32, also spelled bfloat16, float16, "
                         "float32)");
            }
            c.dtype = parse_dtype(text);
          },
          [](std::ostream& out, const RunConfig& c) {
            out << "dtype = " << dtype_name(c.dtype) << "\n";
          }});
  for (Row& r : quantization_rows<RunConfig>()) rows.push_back(std::move(r));
  rows.push_back(boolean(
      "bias", G::kProblem, "add a bias [hidden_out] to every output",
      [](auto& c) -> auto& { return c.bias; }));
  rows.push_back(boolean(
      "transpose_batch_sequence", G::kProblem,
      "sequence-first activations [seq_len, batch, hidden] as Megatron lays "
      "them out (sequence dim 0, no reorder); off: [batch, seq_len, hidden]",
      [](auto& c) -> auto& { return c.transpose_batch_sequence; }));
  rows.push_back(Row{
      "std", G::kProblem, "standard deviation of the normal random x and w", "unitless", true,
      Sweep::kYes,
      [](const RunConfig& d) {
        return po::value<float>()->value_name("X")->default_value(d.std, float_text(d.std));
      },
      [](const OptionReader& r, RunConfig& c) {
        c.std = r.get<float>("std");
        if (!(c.std > 0.0f) || !std::isfinite(c.std)) {
          r.fail("std", float_text(c.std), "must be a positive, finite standard deviation");
        }
      },
      [](std::ostream& out, const RunConfig& c) { out << "std = " << float_text(c.std) << "\n"; },
      ValueKind::kNumber});
  rows.push_back(
      Row{"seed", G::kProblem, "seed of the random inputs; every rank derives its shard from it",
          "unsigned integer", true, Sweep::kYes,
          [](const RunConfig& d) {
            // Text, so that a negative or oversized seed gets this row's message, not Boost's.
            return po::value<std::string>()->value_name("N")->default_value(std::to_string(d.seed));
          },
          [](const OptionReader& r, RunConfig& c) {
            const auto text = r.get<std::string>("seed");
            const auto seed = parse_integer<uint64_t>(text);
            if (!seed) r.fail("seed", text, "must be an unsigned 64-bit integer");
            c.seed = *seed;
          },
          [](std::ostream& out, const RunConfig& c) { out << "seed = " << c.seed << "\n"; },
          ValueKind::kInteger});

  // Run
  rows.push_back(boolean(
      "check", G::kRun,
      "compare each result with the sequential path (the collective, then "
      "the GEMM, or the GEMM, then the collective) within the dtype's "
      "tolerance",
      [](auto& c) -> auto& { return c.check; }));
  rows.push_back(number<int>(
      "check_rounds", G::kRun, "N", "rounds",
      "checked calls of every GEMM, each on fresh inputs; round r runs the GEMMs of the block "
      "in turn on the same buffers, so plans alternate and buffers are reused",
      [](auto& c) -> auto& { return c.check_rounds; }, 1, "must be at least 1 [rounds]"));
  Row dump = path(
      "output_dump", G::kRun,
      "write the global output of every GEMM of the last check round (gathered on "
      "rank 0) to FILE; cgemm-compare A B compares two such files element by "
      "element, e.g. a CUDA run with a CPU run of the same config and seed",
      [](auto& c) -> auto& { return c.output_dump; });
  dump.read = [](const OptionReader& r, RunConfig& c) {
    c.output_dump = r.path("output_dump");
    if (!c.output_dump.empty() && !c.check) {
      r.fail("output_dump", c.output_dump, "needs check = on (it dumps the checked outputs)");
    }
  };
  rows.push_back(std::move(dump));
  rows.push_back(path(
      "report", G::kRun,
      "write the results and the resolved options as JSON to this file (with --dry_run: the "
      "plan)",
      [](auto& c) -> auto& { return c.report; }));
  // Planning without a backend (launcher/common/dry_run.cpp).
  Row dry = boolean(
      "dry_run", G::kRun,
      "plan only: print every rank's host, local rank, GPU (local rank modulo the "
      "GPUs it sees), dp and tp coordinates and transports, each GEMM's plan and "
      "the bytes of its buffers, then exit 0; creates no backend, allocates "
      "nothing, makes no CUDA call (runs on a login node); --backend auto plans for the "
      "backend a real run of this job would take (cpu where no rank sees a GPU), "
      "--ranks_per_node for the described hosts' GPUs; --report FILE gets the plan as JSON",
      [](auto& c) -> auto& { return c.dry_run; }, Sweep::kPlain);
  dry.value = [](const RunConfig& d) { return bool_value(d.dry_run)->implicit_value(true, "on"); };
  rows.push_back(std::move(dry));
  rows.push_back(number<int>(
      "ranks_per_node", G::kRun, "N", "ranks",
      "with --dry_run from one process: describe a job of dp x tp ranks (--tp needed; at "
      "most " +
          std::to_string(kMaxDescribedRanks) +
          ", and world x tp at most 2^18 = " + std::to_string(kMaxDescribedRankPeers) +
          ") placed N per host; 0 = the placement "
          "of this MPI job",
      [](auto& c) -> auto& { return c.ranks_per_node; }, 0, "must be 0 or more [ranks]",
      Sweep::kPlain));
  rows.push_back(number<int>(
      "gpus_per_node", G::kRun, "N", "GPUs",
      "GPUs a rank sees, for --dry_run's GPU numbers; 0 = CUDA_VISIBLE_DEVICES or the "
      "driver's count (one per rank under --ranks_per_node)",
      [](auto& c) -> auto& { return c.gpus_per_node; }, 0, "must be 0 or more [GPUs]",
      Sweep::kPlain));
  rows.push_back(number<int>(
      "compute_capability", G::kRun, "CC", "",
      "compute capability --dry_run plans the cuBLAS workspaces for, e.g. "
      "90 = sm 90",
      [](auto& c) -> auto& { return c.compute_capability; }, 10,
      "must be a compute capability such as 90", Sweep::kPlain));

  // Sweep
  rows.push_back(path(
      "sweep_csv", G::kSweep,
      "append one CSV row per experiment (the options, sizes, times, TFLOP/s, "
      "speed-up, check), flushed as each ends; the header is written when FILE "
      "is new or empty",
      [](auto& c) -> auto& { return c.sweep_csv; }));
  rows.push_back(path(
      "sweep_jsonl", G::kSweep,
      "append one JSON object per line per experiment, the same fields as "
      "--sweep_csv",
      [](auto& c) -> auto& { return c.sweep_jsonl; }));
  return rows;
}

// What the MoE experiment does not do, and its sizes together (moe_block.hpp).
void check_moe(const RunConfig& cfg) {
  const MoeOptions& m = cfg.moe;
  if (m.empty_groups >= m.experts) {
    throw OptionError("--moe_empty_groups " + std::to_string(m.empty_groups) +
                      ": must be less than moe_experts " + std::to_string(m.experts) +
                      " (the tokens need a group)");
  }
  if (m.router == MoeRouter::kOneGroup && m.empty_groups != 0) {
    throw OptionError("--moe_empty_groups " + std::to_string(m.empty_groups) +
                      ": moe_router one_group already leaves every group but one empty (give 0)");
  }
  // The largest tensor, the weights [G, H, F], in fp32 bytes: far from int64's end.
  if (static_cast<double>(m.experts) * static_cast<double>(m.hidden) * static_cast<double>(m.ffn) *
          4.0 >
      0x1.0p60) {
    throw OptionError("--moe_experts " + std::to_string(m.experts) + " x moe_hidden " +
                      std::to_string(m.hidden) + " x moe_ffn " + std::to_string(m.ffn) +
                      ": the expert weights are too large");
  }
  if (cfg.experiment != Experiment::kMoe) return;
  const auto refuse = [](const std::string& option, const std::string& why) {
    throw OptionError(option + ": experiment moe " + why);
  };
  if (cfg.dry_run) refuse("--dry_run", "has no dry run (it plans the collective GEMMs)");
  if (!cfg.trace.empty()) refuse("--trace " + cfg.trace, "writes no trace");
  if (!cfg.output_dump.empty()) refuse("--output_dump " + cfg.output_dump, "writes no output dump");
  if (!cfg.sweep_csv.empty()) refuse("--sweep_csv " + cfg.sweep_csv, "runs no sweep");
  if (!cfg.sweep_jsonl.empty()) refuse("--sweep_jsonl " + cfg.sweep_jsonl, "runs no sweep");
  if (cfg.quantization.mode != ScalingMode::kNoScaling) {
    refuse("--scaling " + scaling_option_name(cfg.quantization.mode),
           "runs unscaled bf16, fp16 or fp32 grouped GEMMs (give scaling none)");
  }
}

RunConfig read_config(const OptionReader& r) {
  RunConfig cfg = read_rows(run_rows(), r);
  check_distinct(output_files(cfg), {{"--config", cfg.config_file}});
  check_moe(cfg);
  return cfg;
}

// "a, b and c".
std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return out;
}

// --help's note on sweeps, its option lists from the rows, wrapped at 90 columns.
std::string sweep_notes() {
  std::vector<std::string> sweep, refused;
  for (const Row& row : run_rows()) {
    if (row.sweep == Sweep::kYes && row.group != G::kOverlap) sweep.push_back(row.name);
    if (row.sweep == Sweep::kRefused) refused.push_back(row.name);
  }
  sweep.emplace_back("the overlap options");
  const std::string text =
      "Sweeps: " + listed(sweep) +
      " take a comma-separated list ('seq_len = 1024, 2048', or --collective "
      "all_gather,reduce_scatter). The lists expand to their product, one experiment each, run "
      "one after another in this job (the last list varies fastest); every experiment is "
      "checked before the first runs. " +
      listed(refused) + " may not be swept. A job runs at most " + std::to_string(kMaxExperiments) +
      " experiments. Rank 0 prints a table, one row per experiment; --sweep_csv and "
      "--sweep_jsonl collect the rows. A sweep writes no --report, --trace or --output_dump.";
  std::string out, line;
  std::istringstream words(text);
  for (std::string w; words >> w;) {
    if (!line.empty() && line.size() + 1 + w.size() > 90) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line + "\n";
}

ProgramSpec make_run_program_spec() {
  ProgramSpec spec;
  spec.name = "cgemm-run";
  spec.usage =
      "Usage: cgemm-run [--config FILE] [--NAME VALUE]...\n"
      "Runs a block of overlapped collective GEMMs (all-gather + GEMM, GEMM + reduce-scatter)\n"
      "on every rank of an MPI job, checks them and times them.\n"
      "Options come from the command line, then from the INI file of --config (same names,\n"
      "'NAME = VALUE'), then from the defaults shown as (=...). Booleans take on|off,\n"
      "true|false, yes|no or 1|0. Units are in [brackets].\n";
  spec.notes =
      "The overlap knobs mean what they mean in Transformer Engine's "
      "collective_gemm_bootstrap.\nThe CPU backend ignores compute_stream_priority, "
      "communication_stream_priority,\nnum_sm_for_communication and use_ce; num_max_streams, "
      "aggregate_all_gather and\nchunks_per_rank shape the schedule on both backends.\n\n" +
      sweep_notes() + "\n" + file_notes();
  spec.mesh_caption = "Mesh (world size = dp x tp; a TP group is tp consecutive ranks)";
  spec.positional_hint = "; quote a gemm entry: --gemm \"up_proj all_gather 768 3072\"";
  spec.options = entries_of(run_rows(), RunConfig());
  spec.sweeps = true;
  return spec;
}

// Built once: its texts and entries are constants, and callers that parse many configs in
// one process (tests, the fuzzer) would otherwise format them again for every parse.
const ProgramSpec& run_program_spec() {
  static const ProgramSpec spec = make_run_program_spec();
  return spec;
}

}  // namespace

const std::vector<OptionRow<RunConfig>>& run_rows() {
  static const std::vector<Row> rows = table_of(widen<RunConfig>(shared_rows()), own_rows());
  return rows;
}

const std::vector<std::string_view>& run_sweepable_options() {
  static const std::vector<std::string_view> names = sweepable(run_rows());
  return names;
}

ParseResult parse_run_config(int argc, const char* const* argv) {
  ParseResult result;
  const ParsedOptions parsed =
      parse_options(run_program_spec(), argc, argv,
                    [&](const OptionReader& r) { result.experiments.push_back(read_config(r)); });
  result.help = parsed.help;
  result.help_text = parsed.help_text;
  if (result.help) return result;
  result.labels = parsed.labels;
  result.swept = parsed.swept;
  const size_t count = result.experiments.size();
  result.config = result.experiments.front();
  if (count > 1 && result.config.experiment == Experiment::kMoe) {
    throw OptionError("experiment moe: the options give a sweep of " + std::to_string(count) +
                      " experiments (" + listed(result.swept) +
                      " as lists); the MoE experiment runs one, give single values");
  }
  if (count > 1) {
    for (const auto& [option, path] :
         {std::pair<const char*, const std::string&>{"--report", result.config.report},
          {"--trace", result.config.trace},
          {"--output_dump", result.config.output_dump}}) {
      if (!path.empty()) {
        throw OptionError(std::string(option) + " " + path + ": a sweep (" + std::to_string(count) +
                          " experiments) writes no report, trace or output dump; its rows go to "
                          "--sweep_csv and --sweep_jsonl");
      }
    }
  }
  return result;
}

std::vector<NamedPath> output_files(const RunConfig& cfg) {
  std::vector<NamedPath> out{{"--report", cfg.report}, {"--trace", cfg.trace}};
  if (!cfg.trace.empty()) out.push_back({"--trace's SVG", cfg.trace + ".svg"});
  out.push_back({"--output_dump", cfg.output_dump});
  out.push_back({"--sweep_csv", cfg.sweep_csv, true});
  out.push_back({"--sweep_jsonl", cfg.sweep_jsonl, true});
  return out;
}

std::string to_ini(const RunConfig& cfg) {
  std::ostringstream out;
  out << "# cgemm-run options (valid input to --config)\n";
  if (!cfg.config_file.empty()) out << "# read from " << cfg.config_file << "\n";
  write_ini(out, run_rows(), cfg);
  return out.str();
}

void resolve_mesh(RunConfig& cfg, int world_size) {
  if (cfg.experiment == Experiment::kMoe) {
    if (cfg.fsdp != 1) {
      throw OptionError("--fsdp " + std::to_string(cfg.fsdp) +
                        ": the MoE block's grouped GEMMs have no FSDP gather; run it at fsdp 1");
    }
    // Its ranks run on their own: only dp | world and tp x dp = world hold (a batch of dp
    // and a sequence of the world size divide by anything those allow).
    resolve_dp_tp(cfg.tp, cfg.dp, cfg.dp, world_size, world_size, "");
    return;
  }
  resolve_dp_tp(cfg.tp, cfg.dp, cfg.batch, cfg.seq_len, world_size,
                cfg.fsdp == 1 ? "each data-parallel group runs batch / dp sequences"
                              : "each data-parallel rank runs batch / (dp x fsdp) sequences",
                cfg.fsdp);
  const std::string tp = std::to_string(cfg.tp);
  for (const auto& g : cfg.gemms) {
    // all_gather (column-parallel) shards w's N; reduce_scatter and none (row-parallel)
    // shard the contracting K.
    const bool shards_n = g.collective == CollectiveOp::kAllGather;
    const char* option = shards_n ? "hidden_out" : "hidden_in";
    const int64_t size = shards_n ? g.hidden_out : g.hidden_in;
    if (size % cfg.tp != 0) {
      throw OptionError(std::string(option) + " " + std::to_string(size) + " of gemm '" + g.name +
                        "' is not divisible by tp " + tp + " (" +
                        std::string(collective_name(g.collective)) + " shards " +
                        (shards_n ? "N" : "K") + " over the tensor-parallel group)");
    }
  }
}

GemmDesc with_run_options(GemmDesc d, const RunConfig& cfg) {
  d.quantization = cfg.quantization;
  return d;
}

}  // namespace cgemm::launcher
