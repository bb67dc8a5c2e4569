#pragma once
// cgemm-run's configuration: what the command line and the INI file (--config) resolve to.
// Parsed with Boost.Program_options; the command line overrides the file.
//
// The option table is shared: cgemm-run and cgemm-bench take the options they have in common
// (SharedOptions) from the same descriptions, readers and error machinery (parse_options with
// a ProgramSpec), and each adds only its own options on top.

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <boost/program_options/variables_map.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
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

/// The options of every cgemm job program (cgemm-run, cgemm-bench): one description each
/// (name, default, unit, check, help text), read by read_shared_options.
struct SharedOptions {
  int dp = 1;  // mesh: data-parallel size
  int warmup = 2;
  int iterations = 5;
  BackendKind backend = BackendKind::kAuto;
  bool gpu_sharing = false;  // ranks of a host may share its GPUs (CUDA backend, copy engines)
  double timeout = 300.0;    // seconds any wait may last before the job ends (<= 0: forever)
  std::string trace;         // trace path (Chrome JSON; FILE.svg beside it); empty: none
  OverlapOptions overlap;
  std::string config_file;  // the --config given, for the report
};

struct RunConfig : SharedOptions {
  // mesh (dp: SharedOptions)
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
  // run (warmup, iterations, backend, gpu_sharing, timeout, trace: SharedOptions)
  bool check = true;
  int check_rounds = 1;     // checked calls per GEMM, fresh inputs each, GEMMs in turn
  std::string output_dump;  // file for the global outputs of the last check round; empty: none
  std::string report;       // JSON report path; empty: none

  // planning without a backend (launcher/dry_run.hpp)
  bool dry_run = false;         // plan and print, no backend
  int ranks_per_node = 0;       // dry run of a described job: dp x tp ranks, N per host
  int gpus_per_node = 0;        // GPUs a rank sees in a dry run; 0: detected / one per rank
  int compute_capability = 90;  // what a dry run plans the cuBLAS workspaces for

  // overlap: SharedOptions
  // sweep
  std::string sweep_csv;    // one CSV row per experiment, appended; empty: none
  std::string sweep_jsonl;  // one JSON line per experiment, appended; empty: none
};

/// Thrown for anything wrong in the options: the message names the option and the value.
class OptionError : public Error {
 public:
  using Error::Error;
};

// ---------------------------------------------------------------------------------------
// The option table and its machinery, for every program (cgemm-run, cgemm-bench).

class OptionSources;  // where each value came from: the command line, the file, the default

/// Reads the values of one experiment; every check that fails throws an OptionError naming
/// the option, the value and where it came from ("--dp 0", "dp = 0 (b.ini, line 3)").
class OptionReader {
 public:
  OptionReader(const boost::program_options::variables_map& vm, const OptionSources& src)
      : vm_(vm), src_(src) {}

  template <typename T>
  T get(const std::string& name) const {
    return vm_[name].as<T>();
  }
  template <typename T>
  T at_least(const std::string& name, T min, const char* what) const {
    const T v = get<T>(name);
    if (v < min) fail(name, std::to_string(v), what);
    return v;
  }
  /// A file option: none when not given; given empty, a bad option (not "no file").
  std::string path(const std::string& name) const;
  /// Whether the option has a value (given, or defaulted).
  bool has(const std::string& name) const { return vm_.count(name) > 0; }
  bool on_command_line(const std::string& name) const;
  const std::string& file() const;  // the --config file; empty: none
  [[noreturn]] void fail(const std::string& name, const std::string& value,
                         const std::string& what) const;

 private:
  const boost::program_options::variables_map& vm_;
  const OptionSources& src_;
};

/// The groups of a program's options, in --help order: general, mesh, before_run, run,
/// overlap, after. The table fills general (help, version, config), mesh (dp), run (warmup,
/// iterations, timeout, backend, gpu_sharing, trace) and overlap (all the knobs); a program
/// adds its own options to mesh and run and in groups of its own.
struct OptionGroups {
  static constexpr unsigned kWidth = 100;  // help text columns
  static constexpr unsigned kDescColumn = 50;
  explicit OptionGroups(const std::string& mesh_caption);
  boost::program_options::options_description general, mesh, run, overlap;
  std::vector<boost::program_options::options_description> before_run, after;
};

/// What makes a program of the table: its name (in messages, --help and --version), its
/// --help text around the options, its defaults of the shared options and its own options.
struct ProgramSpec {
  std::string name;             // "cgemm-bench"
  std::string usage;            // --help: before the options
  std::string notes;            // --help: after them
  std::string mesh_caption;     // the Mesh group's title
  std::string positional_hint;  // appended to "options are '--NAME VALUE'" for a stray argument
  SharedOptions defaults;       // shown by --help and taken when an option is not given
  std::function<void(OptionGroups&)> add_options;  // the program's own options
  /// Options that may hold a comma-separated list (a sweep: one experiment per combination);
  /// not_sweepable are refused as lists. Both empty: no sweeps (commas reach the readers).
  std::vector<std::string_view> sweepable, not_sweepable;
};

/// A group's options_description with the table's columns.
boost::program_options::options_description option_group(const std::string& caption);
/// A bool option: on|off, true|false, yes|no, 1|0, on the command line as in the file.
boost::program_options::typed_value<bool>* bool_value(bool def);

/// What parse_options found besides the experiments it handed to the reader.
struct ParsedOptions {
  bool help = false;                // --help or --version: print help_text and exit 0
  std::string help_text;            // filled when help
  std::vector<std::string> labels;  // per experiment: "seq_len=1024 dtype=bf16" (swept values)
  std::vector<std::string> swept;   // the swept options' names, in list order
};

/// Parses argv and the --config INI file it names (the command line wins, the defaults fill
/// in the rest) with spec's options, and calls read once per experiment (once without a
/// sweep). Throws OptionError; an error of one experiment of a sweep names the experiment.
ParsedOptions parse_options(const ProgramSpec& spec, int argc, const char* const* argv,
                            const std::function<void(const OptionReader&)>& read);

/// The shared options of one experiment, checked.
SharedOptions read_shared_options(const OptionReader& r);

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

/// The options of cgemm-run that may hold a sweep list, in --help order.
const std::vector<std::string_view>& run_sweepable_options();

/// The files the run writes (report, trace and its SVG, output dump, sweep rows), named by
/// their options; empty paths for those not given.
std::vector<NamedPath> output_files(const RunConfig& cfg);

/// Checks what needs the world size: world % dp == 0, tp * dp == world, seq_len % tp == 0,
/// hidden sizes divisible by tp, batch % dp == 0. Resolves tp when 0. Throws OptionError.
void resolve_mesh(RunConfig& cfg, int world_size);

/// The resolved config as INI text (what the report prints).
std::string to_ini(const RunConfig& cfg);

}  // namespace cgemm::launcher
