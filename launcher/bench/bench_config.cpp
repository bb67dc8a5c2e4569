// cgemm-bench's options: the shared rows (shared_options.cpp) plus the benchmark's own.

#include "bench_config.hpp"

#include "bench/parts/parts.hpp"
#include "common/quantization_options.hpp"
#include "l2_flush_memory.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <boost/program_options.hpp>

#include "cgemm/sharding/scaling_mode.hpp"

namespace cgemm::launcher {

namespace po = boost::program_options;

namespace {

const std::vector<BenchShape> kShapes = {
    {"standard", 4, 8192, 4096, 8192, 8192, 4096},
    {"llama70b", 1, 8192, 8192, 28672, 28672, 8192},
    {"gpt3_175b", 1, 4096, 12288, 49152, 49152, 12288},
    {"small", 1, 2048, 4096, 4096, 4096, 4096},
    {"tiny", 2, 64, 64, 128, 128, 64, "for tests on CPUs"},
};

constexpr const char* kDefaultCases = "standard,llama70b,gpt3_175b,small";

// "2,4,8" -> {2, 4, 8}: each at least `min`, no repeats.
std::vector<int> int_list(const OptionReader& r, const std::string& name, int min) {
  const auto text = r.get<std::string>(name);
  std::vector<int> out;
  for (const std::string& item : r.list(name)) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size()) r.fail(name, text, "'" + item + "' is not an integer");
    if (v < min) r.fail(name, text, "each value must be >= " + std::to_string(min));
    if (std::find(out.begin(), out.end(), v) != out.end()) {
      r.fail(name, text, std::to_string(v) + " is given twice");
    }
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> study_list(const OptionReader& r) {
  // Not given: none (the sweep); given, a list like any other (an empty one is refused).
  if (!r.given("parts")) return {};
  const auto text = r.get<std::string>("parts");
  const std::vector<std::string>& known = parts::study_names();
  std::vector<std::string> out;
  bool all = false;
  for (const std::string& item : r.list("parts")) {
    if (item == "all") {
      all = true;
      continue;
    }
    if (std::find(known.begin(), known.end(), item) == known.end()) {
      r.fail(
          "parts", text,
          "unknown study '" + item +
              "' (known: chunking, interference, copy_bandwidth, quantize, grouped, grouped_fp8, "
              "all)");
    }
    if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
  }
  if (all) {
    // The schedule's parts; grouped and grouped_fp8 (the MoE grouped GEMM's paths, large
    // cases of their own) run only when named.
    for (const std::string& k : known) {
      if (k != "grouped" && k != "grouped_fp8" &&
          std::find(out.begin(), out.end(), k) == out.end()) {
        out.push_back(k);
      }
    }
  }
  // In run order, whatever the order given.
  std::vector<std::string> ordered;
  for (const std::string& k : known) {
    if (std::find(out.begin(), out.end(), k) != out.end()) ordered.push_back(k);
  }
  return ordered;
}

// 4096, 1e+12: the shortest text of an --l2_mib value.
std::string format_mib(double mib) {
  std::ostringstream text;
  text << mib;
  return text.str();
}

std::string known_cases() {
  std::string out;
  for (const auto& s : kShapes) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

using Row = OptionRow<BenchConfig>;
using G = OptionGroup;

// A list option read by `read` (commas reach it: cgemm-bench has no sweeps).
template <typename Read>
Row list_row(std::string name, G group, std::string help, std::string def, Read read) {
  return Row{std::move(name),
             group,
             std::move(help),
             "",
             true,
             Sweep::kPlain,
             [def](const BenchConfig&) {
               return po::value<std::string>()->value_name("LIST")->default_value(def);
             },
             read,
             {}};
}

std::vector<Row> own_rows() {
  std::vector<Row> rows;
  // Benchmark
  rows.push_back(list_row(
      "cases", G::kBenchmark, cases_help(), kDefaultCases,
      [](const OptionReader& r, BenchConfig& cfg) {
        const auto text = r.get<std::string>("cases");
        cfg.cases.clear();
        for (const std::string& item : r.list("cases")) {
          if (std::none_of(kShapes.begin(), kShapes.end(),
                           [&](const BenchShape& s) { return s.name == item; })) {
            r.fail("cases", text, "unknown case '" + item + "' (known: " + known_cases() + ")");
          }
          cfg.cases.push_back(item);
        }
      }));
  rows.push_back(bool_row<BenchConfig>(
      "knobs", G::kBenchmark,
      "also sweep the overlap knobs (use_ce, aggregate_all_gather, num_max_streams 1/2/3, "
      "chunks_per_rank 2/4) on the first case (num_sm_for_communication has no effect, so it "
      "is not swept)",
      [](auto& c) -> auto& { return c.knobs; }, Sweep::kPlain));
  rows.push_back(bool_row<BenchConfig>(
      "ring_bandwidth", G::kBenchmark,
      "before the cases, also time the ring's transport alone (--transport: mpi or ucx on the "
      "CPU backend): one ring step, each TP rank sending to the next, for messages of 1 KiB to "
      "16 MiB (x4); median of the slowest rank's step, GB/s per rank; written to "
      "cgemm_ring.{csv,md} in --out (needs tp >= 2)",
      [](auto& c) -> auto& { return c.ring_bandwidth; }, Sweep::kPlain));
  rows.push_back(
      Row{"l2_mib",
          G::kBenchmark,
          "L2 size: inputs rotate over enough copies to exceed twice this (at most " +
              format_mib(kMaxL2Mib) +
              "; the copies are checked against the free memory before they are allocated)",
          "MiB",
          true,
          Sweep::kPlain,
          [](const BenchConfig& d) {
            std::ostringstream text;
            text << d.l2_mib;
            return po::value<double>()->value_name("X")->default_value(d.l2_mib, text.str());
          },
          [](const OptionReader& r, BenchConfig& cfg) {
            cfg.l2_mib = r.get<double>("l2_mib");
            if (!std::isfinite(cfg.l2_mib) || !(cfg.l2_mib > 0)) {
              r.fail("l2_mib", std::to_string(cfg.l2_mib), "must be a positive size [MiB]");
            }
            if (cfg.l2_mib > kMaxL2Mib) {
              r.fail("l2_mib", format_mib(cfg.l2_mib),
                     "must be at most " + format_mib(kMaxL2Mib) + " [MiB]");
            }
          },
          {}});
  rows.push_back(Row{"out",
                     G::kBenchmark,
                     "folder for cgemm_bench.csv, cgemm_bench.json and cgemm_bench.md (with "
                     "--parts, cgemm_parts*); created, with its parents, when missing",
                     "path",
                     true,
                     Sweep::kPlain,
                     [](const BenchConfig& d) {
                       return po::value<std::string>()->value_name("DIR")->default_value(d.out);
                     },
                     [](const OptionReader& r, BenchConfig& cfg) {
                       cfg.out = r.get<std::string>("out");
                       if (cfg.out.empty())
                         r.fail("out", cfg.out, "an empty path (a folder; '.' is the default)");
                     },
                     {}});
  rows.push_back(path_row<BenchConfig>(
      "peers", G::kBenchmark, "FILE",
      "CSV of bench/peers/torch_async_tp.py to compare against, joined by case",
      [](auto& c) -> auto& { return c.peers; }));

  // Parts (launcher/bench/parts/parts.hpp)
  rows.push_back(Row{
      "parts",
      G::kParts,
      "measure the parts of the schedules alone, on one GPU, for --cases, and write "
      "cgemm_parts.md and cgemm_parts_STUDY.csv to --out: chunking (the chunk GEMMs back to "
      "back against the whole GEMM), interference (a chunk GEMM alone and beside a copy of "
      "one step's bytes on another stream), copy_bandwidth (device-to-device "
      "cudaMemcpyAsync against size), quantize (the per-tensor FP8 amax and quantize kernels on "
      "bf16 of the same sizes, against a copy of the same bytes), grouped (the grouped GEMM of "
      "a mixture-of-experts layer, the five bf16 MoE cases of docs/PERFORMANCE.md's grouped GEMM "
      "table, not --cases: a loop "
      "of cuBLASLt GEMMs, one cublasGemmGroupedBatchedEx and one dense cuBLASLt GEMM of all "
      "rows; CUDA backend, or the CPU with --parts_grouped_divide), grouped_fp8 (the same cases "
      "in FP8, e4m3 with a scale_inv per group: the loop and the cuBLASLt tiles against the bf16 "
      "tiles), or all (every study but the grouped two) [default: none: the sweep]. With --scaling "
      "delayed or current, chunking times the "
      "FP8 GEMMs the runtime runs "
      "on the operands quantized once before timing (--lhs_format x --rhs_format, e4m3 by "
      "default; the other studies are unchanged)",
      "",
      true,
      Sweep::kPlain,
      [](const BenchConfig&) {
        return po::value<std::string>()->value_name("LIST")->default_value("");
      },
      [](const OptionReader& r, BenchConfig& cfg) { cfg.parts = study_list(r); },
      {}});
  rows.push_back(list_row("parts_tp", G::kParts,
                          "tp values whose local GEMMs chunking and interference measure (one "
                          "rank plays one rank of each)",
                          "2,4,8", [](const OptionReader& r, BenchConfig& cfg) {
                            cfg.parts_tp = int_list(r, "parts_tp", 1);
                          }));
  rows.push_back(list_row("parts_chunks_per_rank", G::kParts,
                          "chunking: chunks per rank, split as the runtime's chunks_per_rank "
                          "splits them (tp x N chunks; tp 1 takes 1 only)",
                          "1,4", [](const OptionReader& r, BenchConfig& cfg) {
                            cfg.parts_chunks_per_rank = int_list(r, "parts_chunks_per_rank", 1);
                          }));
  Row copy = number_row<BenchConfig, int64_t>(
      "parts_max_copy_mib", G::kParts, "N", "MiB",
      "copy_bandwidth and quantize: transfers (bf16 tensors) of 1, 2, 4, ... MiB up to N",
      [](auto& c) -> auto& { return c.parts_max_copy_mib; }, 1, "must be >= 1 [MiB]",
      Sweep::kPlain);
  copy.read = [](const OptionReader& r, BenchConfig& cfg) {
    cfg.parts_max_copy_mib = r.at_least<int64_t>("parts_max_copy_mib", 1, "must be >= 1 [MiB]");
    if (cfg.parts_max_copy_mib > (int64_t{1} << 20)) {
      r.fail("parts_max_copy_mib", std::to_string(cfg.parts_max_copy_mib),
             "must be <= 1048576 [MiB]");
    }
  };
  rows.push_back(std::move(copy));
  Row divide = number_row<BenchConfig, int64_t>(
      "parts_grouped_divide", G::kParts, "D", "",
      "grouped: divide the cases' tokens, K and N by D (G and the skew rule unchanged), for a "
      "quick run; 1 (the table's sizes) on the GPU, >= 16 on the CPU backend",
      [](auto& c) -> auto& { return c.parts_grouped_divide; }, 1, "must be >= 1", Sweep::kPlain);
  divide.read = [](const OptionReader& r, BenchConfig& cfg) {
    cfg.parts_grouped_divide = r.at_least<int64_t>("parts_grouped_divide", 1, "must be >= 1");
    if (cfg.parts_grouped_divide > 1024) {
      r.fail("parts_grouped_divide", std::to_string(cfg.parts_grouped_divide), "must be <= 1024");
    }
  };
  rows.push_back(std::move(divide));
  rows.push_back(path_row<BenchConfig>(
      "torch_chunks", G::kParts, "FILE",
      "chunking: CSV of bench/peers/torch_chunking.py (torch.mm on the same chunks), or with "
      "--scaling of bench/peers/torch_scaled_mm.py (torch._scaled_mm, e4m3), joined by case, "
      "collective, tp and chunks; a file of the other dtype is refused",
      [](auto& c) -> auto& { return c.torch_chunks; }));
  return rows;
}

BenchConfig read_bench_config(const OptionReader& r) {
  BenchConfig cfg = read_rows(bench_rows(), r);
  const ScalingMode mode = cfg.quantization.mode;
  if (!cfg.parts.empty() && mode != ScalingMode::kNoScaling) {
    // Only chunking times quantized GEMMs; the other studies time bf16 GEMMs and FP8 kernels
    // of their own, so a scaling without chunking would be silently ignored. Block scaling's
    // scales have no buffers in --parts.
    const bool chunking =
        std::find(cfg.parts.begin(), cfg.parts.end(), "chunking") != cfg.parts.end();
    if (!chunking) {
      r.fail("scaling", scaling_option_name(mode),
             "--parts takes a scaling for chunking only (its chunk GEMMs in FP8; --parts "
             "quantize times the FP8 kernels without one); add chunking to --parts, or drop "
             "--scaling");
    }
    if (!is_tensor_scaling(mode)) {
      r.fail("scaling", scaling_option_name(mode),
             "--parts chunking times per-tensor FP8 GEMMs: delayed or current");
    }
  }
  std::vector<NamedPath> outputs = bench_outputs(cfg.out, cfg.trace);
  for (NamedPath& p : parts_outputs(cfg.out, cfg.parts)) outputs.push_back(std::move(p));
  check_distinct(outputs, {{"--peers", cfg.peers},
                           {"--torch_chunks", cfg.torch_chunks},
                           {"--config", cfg.config_file}});
  return cfg;
}

ProgramSpec bench_program_spec() {
  ProgramSpec spec;
  spec.name = "cgemm-bench";
  spec.usage =
      "Usage: mpirun -np N cgemm-bench [--config FILE] [--NAME VALUE]...\n"
      "Benchmarks the overlapped collective GEMMs of cgemm against GEMM alone, collective alone\n"
      "and the sequential path (bf16, tp = world / dp). With --scaling the bf16 x and w are\n"
      "quantized on every call: GEMM is then the FP8 GEMM alone on the quantized copies, the\n"
      "all-gather moves the FP8 x, and sequential and overlapped include the quantization.\n"
      "Times in ms are medians over ranks' slowest of the timed iterations; TFLOP/s per GPU\n"
      "(per rank on the CPU backend);\n"
      "efficiency = max(GEMM, collective) / overlapped; speed-up = sequential / overlapped.\n"
      "Bandwidths in GB/s (1e9 bytes/s) as nccl-tests reports them: bytes = the collective's\n"
      "whole array (the all-gather's gathered output, the reduce-scatter's input on one rank);\n"
      "algbw = bytes / collective-alone time; busbw = algbw x (tp-1)/tp; overlapped busbw =\n"
      "bytes x (tp-1)/tp / overlapped time (a floor on the link speed while it overlaps).\n"
      "Options come from the command line, then from the INI file of --config (same names,\n"
      "'NAME = VALUE'), then from the defaults shown as (=...). Booleans take on|off,\n"
      "true|false, yes|no or 1|0. Units are in [brackets]. The options of the General, Mesh,\n"
      "Problem (the quantization rows), Run and Overlap groups are cgemm-run's.\n";
  spec.notes =
      "warmup and iterations count runs of each path (GEMM, collective, sequential,\n"
      "overlapped); at least 20 timed iterations for reported figures. --trace records the\n"
      "first case's all-gather and reduce-scatter GEMMs with the default knobs. The overlap\n"
      "knobs are the defaults the knob sweep moves one at a time.\n\n" +
      file_notes();
  spec.mesh_caption = "Mesh (tp = world size / dp; a TP group is tp consecutive ranks)";
  spec.options = entries_of(bench_rows(), BenchConfig());
  return spec;  // no sweeps: --cases and --knobs are the benchmark's sweep
}

}  // namespace

const std::vector<OptionRow<BenchConfig>>& bench_rows() {
  static const std::vector<Row> rows = [] {
    std::vector<Row> own = own_rows();
    for (Row& r : quantization_rows<BenchConfig>()) own.push_back(std::move(r));
    return table_of(widen<BenchConfig>(shared_rows()), own);
  }();
  return rows;
}

BenchConfig::BenchConfig() {
  warmup = 5;
  iterations = 20;
}

const std::vector<BenchShape>& bench_shapes() { return kShapes; }

const BenchShape& bench_shape(const std::string& name) {
  for (const auto& s : kShapes) {
    if (s.name == name) return s;
  }
  throw Error("unknown case '" + name + "' (known: " + known_cases() + ")");
}

std::string cases_help() {
  std::string out =
      "comma-separated shapes (global batch and seq; hidden sizes K->N of the all-gather (AG) "
      "and reduce-scatter (RS) GEMMs, before sharding): ";
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const BenchShape& s = kShapes[i];
    out += (i ? ", " : "") + s.name + " (batch " + std::to_string(s.batch) + ", seq " +
           std::to_string(s.seq) + ", AG " + std::to_string(s.ag_in) + "->" +
           std::to_string(s.ag_out) + ", RS " + std::to_string(s.rs_in) + "->" +
           std::to_string(s.rs_out) + (s.note.empty() ? "" : "; " + s.note) + ")";
  }
  return out;
}

BenchParseResult parse_bench_config(int argc, const char* const* argv) {
  BenchParseResult result;
  const ParsedOptions parsed =
      parse_options(bench_program_spec(), argc, argv,
                    [&](const OptionReader& r) { result.config = read_bench_config(r); });
  result.help = parsed.help;
  result.help_text = parsed.help_text;
  return result;
}

std::vector<NamedPath> bench_outputs(const std::string& outdir, const std::string& trace) {
  std::vector<NamedPath> out;
  for (const char* ext : {"csv", "json", "md"}) {
    out.push_back({"--out's cgemm_bench." + std::string(ext), outdir + "/cgemm_bench." + ext});
  }
  for (const char* ext : {"csv", "md"}) {
    out.push_back({"--out's cgemm_ring." + std::string(ext), outdir + "/cgemm_ring." + ext});
  }
  out.push_back({"--trace", trace});
  if (!trace.empty()) out.push_back({"--trace's SVG", trace + ".svg"});
  return out;
}

std::vector<NamedPath> parts_outputs(const std::string& outdir,
                                     const std::vector<std::string>& studies) {
  std::vector<NamedPath> out;
  if (studies.empty()) return out;
  out.push_back({"--out's cgemm_parts.md", outdir + "/cgemm_parts.md"});
  for (const std::string& s : studies) {
    out.push_back({"--out's cgemm_parts_" + s + ".csv", outdir + "/cgemm_parts_" + s + ".csv"});
  }
  return out;
}

}  // namespace cgemm::launcher
