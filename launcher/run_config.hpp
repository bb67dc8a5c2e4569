#pragma once
// cgemm-run's configuration: what the command line and the INI file (--config) resolve to.
// Parsed with Boost.Program_options; the command line overrides the file.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/options.hpp"
#include "output_files.hpp"

namespace cgemm::launcher {

/// One GEMM of the block: x [batch, seq, hidden_in] @ w [hidden_in, hidden_out] (+ bias),
/// with the collective it is fused with (the standard tensor-sequence-parallel layouts).
struct GemmSpec {
  std::string name;  // e.g. "up_proj"
  CollectiveOp collective = CollectiveOp::kAllGather;
  int64_t hidden_in = 0;   // K
  int64_t hidden_out = 0;  // N
};

struct RunConfig {
  // mesh
  int dp = 1;
  int tp = 0;  // 0: world size / dp
  // problem
  int64_t batch = 1;
  int64_t seq_len = 0;
  std::vector<GemmSpec> gemms;  // the block, in order
  DType dtype = DType::kBFloat16;
  bool bias = true;
  bool transpose_batch_sequence = false;  // [S, B, H] activations (sequence dim 0)
  float std = 0.023f;
  uint64_t seed = 1234;
  // run
  int warmup = 2;
  int iterations = 5;
  bool check = true;
  BackendKind backend = BackendKind::kAuto;
  bool gpu_sharing = false;  // ranks of a host may share its GPUs (CUDA backend, copy engines)
  int check_rounds = 1;      // checked calls per GEMM, fresh inputs each, GEMMs in turn
  double timeout = 300.0;    // seconds any wait may last before the job ends (<= 0: forever)
  std::string output_dump;   // file for the global outputs of the last check round; empty: none
  std::string report;        // JSON report path; empty: none
  std::string trace;         // trace path (Chrome JSON; FILE.svg beside it); empty: none

  // planning without a backend (launcher/dry_run.hpp)
  bool dry_run = false;         // plan and print, no backend
  int ranks_per_node = 0;       // dry run of a described job: dp x tp ranks, N per host
  int gpus_per_node = 0;        // GPUs a rank sees in a dry run; 0: detected / one per rank
  int compute_capability = 90;  // what a dry run plans the cuBLAS workspaces for

  OverlapOptions overlap;
  // sweep
  std::string sweep_csv;    // one CSV row per experiment, appended; empty: none
  std::string sweep_jsonl;  // one JSON line per experiment, appended; empty: none
  std::string config_file;  // the --config given, for the report
};

/// Thrown for anything wrong in the options: the message names the option and the value.
class OptionError : public Error {
 public:
  using Error::Error;
};

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

/// The files the run writes (report, trace and its SVG, output dump, sweep rows), named by
/// their options; empty paths for those not given.
std::vector<NamedPath> output_files(const RunConfig& cfg);

/// Checks what needs the world size: world % dp == 0, tp * dp == world, seq_len % tp == 0,
/// hidden sizes divisible by tp, batch % dp == 0. Resolves tp when 0. Throws OptionError.
void resolve_mesh(RunConfig& cfg, int world_size);

/// The resolved config as INI text (what the report prints).
std::string to_ini(const RunConfig& cfg);

}  // namespace cgemm::launcher
