#pragma once
// cgemm-bench's configuration: the shared rows (shared_options.hpp: mesh dp, backend,
// gpu_sharing, timeout, warmup, iterations, the overlap knobs, trace, --config) plus the
// benchmark's own rows (bench_config.cpp: cases, knobs, l2_mib, out, peers, the --parts
// studies) and cgemm-run's quantization rows (quantization_options.hpp: scaling, formats, recipe),
// read by the same machinery (option_table.hpp): the same names, checks, messages and
// --help text for what they share.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/runtime/plan_description.hpp"
#include "common/output_files.hpp"
#include "common/shared_options.hpp"

namespace cgemm::launcher {

/// A shape of the sweep (docs/PERFORMANCE.md reports them). hidden sizes are the global
/// K -> N of each projection; batch and seq are global.
struct BenchShape {
  std::string name;
  int64_t batch, seq;
  int64_t ag_in, ag_out;  // all-gather GEMM (column-parallel up projection)
  int64_t rs_in, rs_out;  // reduce-scatter GEMM (row-parallel down projection)
  std::string note = {};  // said after the sizes in --help; may be empty
};

/// The known shapes, in --help order.
const std::vector<BenchShape>& bench_shapes();
const BenchShape& bench_shape(const std::string& name);  // throws Error when unknown
/// --cases' help: every shape with its sizes, from bench_shapes() (so the two cannot differ).
std::string cases_help();

struct BenchConfig : SharedOptions {
  BenchConfig();                   // cgemm-bench's defaults: warmup 5, iterations 20
  std::vector<std::string> cases;  // names of bench_shapes(), in order
  bool knobs = true;               // also sweep the overlap knobs on the first case
  bool ring_bandwidth = false;     // also time one ring step of the transport alone (sizes)
  double l2_mib = 60;              // inputs rotate over enough copies to exceed twice this
  std::string out = ".";           // folder of cgemm_bench.{csv,json,md}
  std::string peers;               // CSV of bench/peers/torch_async_tp.py; empty: none
  // --parts (launcher/bench/parts/parts.hpp): the studies to run instead of the sweep, one rank.
  std::vector<std::string> parts;      // empty: none (the sweep)
  std::vector<int> parts_tp{2, 4, 8};  // tp of the local GEMMs studied
  std::vector<int> parts_chunks_per_rank{1, 4};
  int64_t parts_max_copy_mib = 512;  // copy_bandwidth: 1 MiB up to this
  int64_t parts_grouped_divide = 1;  // grouped: tokens, K and N divided by this
  std::string torch_chunks;          // CSV of bench/peers/torch_chunking.py; empty: none
  // --scaling and the rest: every GEMM the sweep plans is quantized so (none: bf16 as before).
  QuantizationDesc quantization;
};

struct BenchParseResult {
  BenchConfig config;
  bool help = false;      // --help or --version: print help_text and exit 0
  std::string help_text;  // filled when help
};

/// cgemm-bench's option rows (the shared ones and its own), in --help order.
const std::vector<OptionRow<BenchConfig>>& bench_rows();

/// Parses argv and the --config INI file it names. Throws OptionError (the message names the
/// option and the value, as cgemm-run's do).
BenchParseResult parse_bench_config(int argc, const char* const* argv);

/// The files cgemm-bench writes: cgemm_bench.{csv,json,md} in outdir (and cgemm_ring.{csv,md}
/// with --ring_bandwidth), the trace and its SVG.
std::vector<NamedPath> bench_outputs(const std::string& outdir, const std::string& trace);
/// The files --parts writes in outdir: cgemm_parts.md and cgemm_parts_STUDY.csv per study.
std::vector<NamedPath> parts_outputs(const std::string& outdir,
                                     const std::vector<std::string>& studies);

}  // namespace cgemm::launcher
