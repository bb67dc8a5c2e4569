#pragma once
// cgemm-run's configuration: what the command line and the INI file (--config) resolve to,
// read through cgemm-run's option rows (the shared rows of shared_options.hpp and its own,
// run_config.cpp) by the option machinery (option_table.hpp); the command line overrides the
// file.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/options.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "moe_options.hpp"
#include "option_table.hpp"
#include "output_files.hpp"
#include "shared_options.hpp"

namespace cgemm::launcher {

/// One GEMM of the block: x [batch, seq, hidden_in] @ w [hidden_in, hidden_out] (+ bias),
/// with the collective it is fused with (the standard tensor-sequence-parallel layouts).
struct GemmSpec {
  std::string name;  // e.g. "up_proj"
  CollectiveOp collective = CollectiveOp::kAllGather;
  int64_t hidden_in = 0;   // K
  int64_t hidden_out = 0;  // N
};

struct RunConfig : SharedOptions {
  // What the job runs: the block of collective GEMMs below, or the MoE block of `moe`.
  Experiment experiment = Experiment::kCollectiveGemm;
  MoeOptions moe;  // experiment moe (moe_block.hpp); the gemm options do not apply to it
  // mesh (dp: SharedOptions)
  int tp = 0;  // 0: world size / dp
  // problem
  // A bare run (no --config): one small all-gather GEMM that runs on CPUs in about a second.
  int64_t batch = 2;
  int64_t seq_len = 256;
  std::vector<GemmSpec> gemms{{"all_gather", CollectiveOp::kAllGather, 256, 512}};  // in order
  DType dtype = DType::kBFloat16;
  bool bias = true;
  bool transpose_batch_sequence = false;  // [S, B, H] activations (sequence dim 0)
  float std = 0.023f;
  uint64_t seed = 1234;
  QuantizationDesc quantization;  // scaling none: the GEMMs run in dtype
  // run (warmup, iterations, backend, gpu_sharing, timeout, trace: SharedOptions)
  bool check = true;
  int check_rounds = 1;     // checked calls per GEMM, fresh inputs each, GEMMs in turn
  std::string output_dump;  // file for the global outputs of the last check round; empty: none
  std::string report;       // JSON report path; empty: none

  // planning without a backend (launcher/common/dry_run.hpp)
  bool dry_run = false;         // plan and print, no backend
  int ranks_per_node = 0;       // dry run of a described job: dp x tp ranks, N per host
  int gpus_per_node = 0;        // GPUs a rank sees in a dry run; 0: detected / one per rank
  int compute_capability = 90;  // what a dry run plans the cuBLAS workspaces for

  // overlap: SharedOptions
  // sweep
  std::string sweep_csv;    // one CSV row per experiment, appended; empty: none
  std::string sweep_jsonl;  // one JSON line per experiment, appended; empty: none
};

// ---------------------------------------------------------------------------------------
// cgemm-run

/// Result of parsing: a config, or a request to print help/version and exit 0.
struct ParseResult {
  RunConfig config;  // the first experiment (the only one without a sweep)
  /// Sweeps: options given as comma-separated lists expand to their product, one experiment
  /// each, in order (the last list varies fastest); every one is parsed and checked.
  std::vector<RunConfig> experiments;
  std::vector<std::string> labels;  // per experiment: "seq_len=1024 dtype=bf16" (swept values)
  std::vector<std::string> swept;   // the swept options' names, in list order
  bool help = false;
  std::string help_text;  // filled when help
};

/// Parses argv (and the --config INI file it names). Validates everything that does not need
/// the world size (sizes > 0, known enums, dp >= 1, ...). Throws OptionError.
ParseResult parse_run_config(int argc, const char* const* argv);

/// `d` with what cgemm-run's options add to every GEMM of the block (the quantization).
GemmDesc with_run_options(GemmDesc d, const RunConfig& cfg);

/// cgemm-run's option rows (the shared ones and its own), in --help order.
const std::vector<OptionRow<RunConfig>>& run_rows();

/// The options of cgemm-run that may hold a sweep list, in --help order: the rows marked so.
const std::vector<std::string_view>& run_sweepable_options();

/// The files the run writes (report, trace and its SVG, output dump, sweep rows), named by
/// their options; empty paths for those not given.
std::vector<NamedPath> output_files(const RunConfig& cfg);

/// Checks what needs the world size: world % dp == 0, tp * dp == world, seq_len % tp == 0,
/// hidden sizes divisible by tp, batch % dp == 0 (experiment moe: only the first two, as its
/// ranks run on their own). Resolves tp when 0. Throws OptionError.
void resolve_mesh(RunConfig& cfg, int world_size);

/// The resolved config as INI text (what the report prints).
std::string to_ini(const RunConfig& cfg);

}  // namespace cgemm::launcher
