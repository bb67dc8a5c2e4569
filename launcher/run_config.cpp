// The option table of the cgemm job programs and cgemm-run's options: the command line and the
// INI file named by --config, parsed with Boost.Program_options. The command line is stored
// first, so its values win; the file fills in the rest; the defaults below fill in what
// neither gives. The shared options (add_shared_options, read_shared_options) are described
// and checked once, here; cgemm-run (run_program_spec) and cgemm-bench (bench_config.cpp) add
// their own on top through a ProgramSpec.
//
// Every error is an OptionError whose message names the option and the value, and says where
// the value came from: "--batch 0" for the command line, "batch = 0 (run.ini, line 7)" for the
// file.

#include "run_config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

#include <boost/program_options.hpp>

#ifndef CGEMM_VERSION
#define CGEMM_VERSION "(version unknown)"
#endif

namespace cgemm::launcher {

namespace po = boost::program_options;

namespace {

// A bare run (no --config): one small all-gather GEMM that runs on CPUs in about a second.
constexpr int64_t kDefaultBatch = 2;
constexpr int64_t kDefaultSeqLen = 256;
constexpr int64_t kDefaultHiddenIn = 256;
constexpr int64_t kDefaultHiddenOut = 512;
constexpr std::string_view kDefaultCollective = "all_gather";
constexpr std::string_view kDefaultDType = "bf16";

const char* on_off(bool b) { return b ? "on" : "off"; }

// Shortest text that reads back as the same float (so to_ini round-trips exactly).
std::string float_text(float v) {
  std::array<char, 32> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc()) return std::to_string(v);
  return std::string(buf.data(), end);
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

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

// ---------------------------------------------------------------------------------------
// The option descriptions. The names are the contract (INI keys and --flags alike).

template <typename T>
po::typed_value<T>* int_value(const char* name, T def) {
  return po::value<T>()->value_name(name)->default_value(def);
}

// The shared table: the options of every program, with the program's defaults.
void add_shared_options(OptionGroups& g, const SharedOptions& defaults) {
  const OverlapOptions& ov = defaults.overlap;
  // clang-format off
  g.general.add_options()
      ("help,h", "print this help and exit")
      ("version", "print the version and exit")
      ("config", po::value<std::string>()->value_name("FILE"),
       "INI file of options: one 'NAME = VALUE' per line (names as below, without the "
       "dashes), '#' starts a comment, no [sections]; the command line overrides the file "
       "[path; default: none]");

  g.mesh.add_options()
      ("dp", int_value<int>("N", defaults.dp),
       "data-parallel size: groups of tp ranks, each running its own batch / dp sequences "
       "[ranks]");

  g.run.add_options()
      ("warmup", int_value<int>("N", defaults.warmup),
       "untimed iterations before the timed ones [iterations]")
      ("iterations", int_value<int>("N", defaults.iterations),
       "timed iterations; times are reported in ms (cgemm-bench adds GB/s) [iterations]")
      ("timeout", po::value<double>()->value_name("S")
                      ->default_value(defaults.timeout, float_text(static_cast<float>(defaults.timeout))),
       "seconds any wait may last (a peer's data, a collective, a barrier, the GPU, the "
       "bootstrap) before the rank names what it waited for and ends the job (exit 4); 0: wait "
       "forever [s]")
      ("backend", po::value<std::string>()->value_name("B")
                      ->default_value(backend_name(defaults.backend)),
       "auto | cpu | cuda. auto: cuda when this cgemm has CUDA and every rank has a GPU of its "
       "own, else cpu (said so when GPUs are short). cuda: ends with one message when a GPU is "
       "missing or shared, unless gpu_sharing is on")
      ("gpu_sharing", bool_value(defaults.gpu_sharing),
       "let ranks of a host share its GPUs on the CUDA backend (rank -> GPU by local rank "
       "modulo the GPU count). For correctness runs of any tp on few GPUs: no NCCL (it refuses "
       "two ranks of a communicator on one GPU), every collective over the copy engines, "
       "use_ce must stay on, and times are not a speed measurement")
      ("trace", po::value<std::string>()->value_name("FILE"),
       "record one extra overlapped call of each GEMM on every rank (every GEMM chunk, "
       "transfer, reorder and partial sum) and write it as Chrome trace-event JSON to FILE "
       "(open in Perfetto) and as an SVG timeline to FILE.svg [path; default: none]");

  g.overlap.add_options()
      ("overlap", po::value<std::string>()->value_name("P")
                      ->default_value(overlap_policy_name(ov.policy)),
       "auto | on | off: whether execute() overlaps; auto decides by a rule from the shape and "
       "the mesh, the same on every run (overlapped when tp > 1 and a chunk's GEMM, with "
       "chunks_per_rank one piece's, is at least 2^34 FLOP, else sequential). "
       "cgemm-run checks and times the overlapped schedule whatever this says (cgemm-bench "
       "times both paths and reports which one execute() keeps)")
      ("num_max_streams", int_value<int>("N", ov.num_max_streams),
       "GEMM (compute) streams the all-gather's chunk GEMMs may use (aggregate mode computes "
       "two chunks at once); the reduce-scatter's partials run in order on one stream so each "
       "is sent as soon as it is done; shapes the schedule on both backends [streams]")
      ("compute_stream_priority", int_value<int>("P", ov.compute_stream_priority),
       "priority of the compute streams, 0 = highest [priority level]; CUDA only, the CPU "
       "backend ignores it")
      ("communication_stream_priority", int_value<int>("P", ov.communication_stream_priority),
       "priority of the communication streams, 0 = highest [priority level]; CUDA only, the "
       "CPU backend ignores it")
      ("num_sm_for_communication", int_value<int>("N", ov.num_sm_for_communication),
       "Transformer Engine's bound on the SMs the transport may take [SMs]: accepted for its "
       "configs but without effect in cgemm: the copy engines take no SMs, and capping NCCL's "
       "CTAs starves it (2 CTAs: 43 against about 300 GB/s); NCCL's bounds come from "
       "CGEMM_NCCL_MIN_CTAS / CGEMM_NCCL_MAX_CTAS")
      ("use_ce", bool_value(ov.use_ce),
       "move chunks with copy engines over CUDA IPC where the TP group shares a node; CUDA "
       "only, the CPU backend ignores it")
      ("aggregate_all_gather", bool_value(ov.aggregate_all_gather),
       "all-gather two chunks per step, opposite ways round the ring; shapes the schedule on "
       "both backends")
      ("chunks_per_rank", int_value<int>("N", ov.chunks_per_rank),
       "pieces each ring chunk moves and multiplies in (tp x N transfers and GEMMs per call): "
       "a step's first GEMM waits for one piece instead of the whole chunk, but smaller GEMMs "
       "cost more (docs/PERFORMANCE.md's chunking table); N must divide a chunk's rows, or "
       "the local batch for batch-first activations; shapes the schedule on both backends "
       "[pieces]");
  // clang-format on
}

// A program's descriptions: its groups, and the descriptions the parsers take.
struct Descriptions {
  explicit Descriptions(const ProgramSpec& spec) : groups(spec.mesh_caption) {
    add_shared_options(groups, spec.defaults);
    if (spec.add_options) spec.add_options(groups);
    file.add(groups.mesh);
    for (const auto& b : groups.before_run) file.add(b);
    file.add(groups.run).add(groups.overlap);
    for (const auto& a : groups.after) file.add(a);
    command_line.add(groups.general).add(file);
  }
  OptionGroups groups;
  po::options_description command_line{OptionGroups::kWidth, OptionGroups::kDescColumn};
  po::options_description file{OptionGroups::kWidth, OptionGroups::kDescColumn};  // no General
};

std::string help_text(const ProgramSpec& spec, const Descriptions& d) {
  std::ostringstream out;
  out << spec.usage;
  // One description holding the groups, so that every group lines up in the same columns.
  po::options_description all(OptionGroups::kWidth, OptionGroups::kDescColumn);
  all.add(d.groups.general).add(d.groups.mesh);
  for (const auto& b : d.groups.before_run) all.add(b);
  all.add(d.groups.run).add(d.groups.overlap);
  for (const auto& a : d.groups.after) all.add(a);
  out << all << "\n";
  out << spec.notes;
  return out.str();
}

// cgemm-run's own options, on top of the shared table.
void add_run_options(OptionGroups& g) {
  const RunConfig defaults;
  // clang-format off
  g.mesh.add_options()
      ("tp", int_value<int>("N", defaults.tp),
       "tensor-parallel size: ranks of one TP group, over which the collectives run; "
       "0 = world size / dp [ranks]");

  auto& problem = g.before_run.emplace_back(option_group(
      "Problem (x [batch, seq_len, hidden_in] @ w [hidden_in, hidden_out])"));
  problem.add_options()
      ("batch", int_value<int64_t>("N", kDefaultBatch),
       "global batch size B, split over dp [sequences]")
      ("seq_len", int_value<int64_t>("N", kDefaultSeqLen),
       "sequence length S, sharded over tp [tokens]")
      ("hidden_in", int_value<int64_t>("K", kDefaultHiddenIn),
       "hidden size K of the single GEMM (the contracting dim) [elements]")
      ("hidden_out", int_value<int64_t>("N", kDefaultHiddenOut),
       "hidden size N of the single GEMM (the output dim) [elements]")
      ("collective", po::value<std::string>()->value_name("OP")
                         ->default_value(std::string(kDefaultCollective)),
       "collective of the single GEMM: none | all_gather (column-parallel, shards N) | "
       "reduce_scatter (row-parallel, shards K)")
      ("gemm", po::value<std::vector<std::string>>()->value_name("\"NAME OP K N\""),
       "one GEMM of a block run in order, e.g. \"up_proj all_gather 768 3072\" (OP as for "
       "--collective, K and N in elements); repeat for more. The block is: the single GEMM "
       "of --collective/--hidden_in/--hidden_out when any of those is on the command line; "
       "else the gemm entries when there are any; else the single GEMM (named after its "
       "collective) [default: none]")
      ("dtype", po::value<std::string>()->value_name("T")
                    ->default_value(std::string(kDefaultDType)),
       "element type of x, w, bias and the output: bf16 | fp16 | fp32 (or bfloat16, "
       "float16, float32)")
      ("bias", bool_value(defaults.bias), "add a bias [hidden_out] to every output")
      ("transpose_batch_sequence", bool_value(defaults.transpose_batch_sequence),
       "sequence-first activations [seq_len, batch, hidden] as Megatron lays them out "
       "(sequence dim 0, no reorder); off: [batch, seq_len, hidden]")
      ("std", po::value<float>()->value_name("X")
                  ->default_value(defaults.std, float_text(defaults.std)),
       "standard deviation of the normal random x and w [unitless]")
      ("seed", po::value<std::string>()->value_name("N")
                   ->default_value(std::to_string(defaults.seed)),
       "seed of the random inputs; every rank derives its shard from it [unsigned integer]");

  g.run.add_options()
      ("check", bool_value(defaults.check),
       "compare each result with the sequential path (the collective, then the GEMM, or the "
       "GEMM, then the collective) within the dtype's tolerance")
      ("check_rounds", int_value<int>("N", defaults.check_rounds),
       "checked calls of every GEMM, each on fresh inputs; round r runs the GEMMs of the block "
       "in turn on the same buffers, so plans alternate and buffers are reused [rounds]")
      ("output_dump", po::value<std::string>()->value_name("FILE"),
       "write the global output of every GEMM of the last check round (gathered on rank 0) to "
       "FILE; cgemm-compare A B compares two such files element by element, e.g. a CUDA run "
       "with a CPU run of the same config and seed [path; default: none]")
      ("report", po::value<std::string>()->value_name("FILE"),
       "write the results and the resolved options as JSON to this file [path; default: none]")
      // Planning without a backend (launcher/dry_run.cpp).
      ("dry_run", bool_value(defaults.dry_run)->implicit_value(true, "on"),
       "plan only: print every rank's host, local rank, GPU (local rank modulo the GPUs it "
       "sees), dp and tp coordinates and transports, each GEMM's plan and the bytes of its "
       "buffers, then exit 0; creates no backend, allocates nothing, makes no CUDA call "
       "(runs on a login node); --backend auto plans as cuda")
      ("ranks_per_node", int_value<int>("N", defaults.ranks_per_node),
       "with --dry_run from one process: describe a job of dp x tp ranks (--tp needed) placed "
       "N per host; 0 = the placement of this MPI job [ranks]")
      ("gpus_per_node", int_value<int>("N", defaults.gpus_per_node),
       "GPUs a rank sees, for --dry_run's GPU numbers; 0 = CUDA_VISIBLE_DEVICES or the "
       "driver's count (one per rank under --ranks_per_node) [GPUs]")
      ("compute_capability", int_value<int>("CC", defaults.compute_capability),
       "compute capability --dry_run plans the cuBLAS workspaces for, e.g. 90 = sm 90");

  auto& sweep = g.after.emplace_back(option_group(
      "Sweep (comma-separated lists of values: one experiment per combination)"));
  sweep.add_options()
      ("sweep_csv", po::value<std::string>()->value_name("FILE"),
       "append one CSV row per experiment (the options, sizes, times, TFLOP/s, speed-up, "
       "check), flushed as each ends; the header is written when FILE is new or empty "
       "[path; default: none]")
      ("sweep_jsonl", po::value<std::string>()->value_name("FILE"),
       "append one JSON object per line per experiment, the same fields as --sweep_csv "
       "[path; default: none]");
  // clang-format on
}

// ---------------------------------------------------------------------------------------
// Where a value came from, for the error messages.

}  // namespace

class OptionSources {
 public:
  void set_command_line(const po::parsed_options& parsed) {
    for (const auto& o : parsed.options) cli_.insert(o.string_key);
  }

  void set_file(std::string path, const std::string& text) {
    file_ = std::move(path);
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) lines_.push_back(line);
  }

  bool on_command_line(const std::string& name) const { return cli_.count(name) > 0; }
  const std::string& file() const { return file_; }

  // 1-based numbers of the lines of the file that set `name` (to `value`, when given), the
  // way Boost reads them: '#' starts a comment, "[section]" prefixes the names that follow.
  std::vector<int> file_lines(const std::string& name,
                              const std::optional<std::string>& value = std::nullopt) const {
    std::vector<int> found;
    std::string section;
    for (size_t i = 0; i < lines_.size(); ++i) {
      std::string line = lines_[i];
      if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      line = trim(line);
      if (line.empty()) continue;
      if (line.front() == '[' && line.back() == ']') {
        section = trim(std::string_view(line).substr(1, line.size() - 2)) + ".";
        continue;
      }
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      if (section + trim(std::string_view(line).substr(0, eq)) != name) continue;
      if (value && trim(std::string_view(line).substr(eq + 1)) != *value) continue;
      found.push_back(static_cast<int>(i + 1));
    }
    return found;
  }

  // 1-based number of the first line that reads as `text` once comments and blanks are cut.
  std::optional<int> find_line(const std::string& text) const {
    for (size_t i = 0; i < lines_.size(); ++i) {
      std::string line = lines_[i];
      if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      if (trim(line) == text) return static_cast<int>(i + 1);
    }
    return std::nullopt;
  }

  // "run.ini, line 7" / "run.ini, lines 3, 9" / "run.ini".
  std::string file_place(const std::vector<int>& lines) const {
    std::string out = file_;
    if (lines.empty()) return out;
    out += lines.size() == 1 ? ", line " : ", lines ";
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(lines[i]);
    }
    return out;
  }

  // "--batch 0", "batch = 0 (run.ini, line 7)" or "batch = 0 (the default)".
  std::string describe(const std::string& name, const std::string& value) const {
    if (on_command_line(name)) {
      const bool quote = value.empty() || value.find_first_of(" \t") != std::string::npos;
      return "--" + name + " " + (quote ? "\"" + value + "\"" : value);
    }
    if (!file_.empty()) {
      auto lines = file_lines(name, value);
      if (lines.empty()) lines = file_lines(name);
      if (!lines.empty()) return name + " = " + value + " (" + file_place(lines) + ")";
    }
    return name + " = " + value + " (the default)";
  }

 private:
  std::set<std::string> cli_;
  std::string file_;
  std::vector<std::string> lines_;
};

namespace {

using Sources = OptionSources;
// ---------------------------------------------------------------------------------------
// Boost's errors, with a hint.

// "--seq-len" -> " (did you mean --seq_len?)": dashes for underscores, or a unique prefix.
std::string spelling_hint(std::string name, const Descriptions& d, bool dashes) {
  name.erase(0, name.find_first_not_of('-'));
  std::string underscored = name;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  std::vector<std::string> candidates;
  for (const auto& opt : d.command_line.options()) {
    const std::string& known = opt->long_name();
    if (known == underscored || known.rfind(underscored, 0) == 0) candidates.push_back(known);
  }
  if (candidates.size() != 1 || candidates.front() == name) return {};
  return std::string(" (did you mean ") + (dashes ? "--" : "") + candidates.front() + "?)";
}

// "; run cgemm-run --help for the options".
std::string help_hint(const std::string& program) {
  return "; run " + program + " --help for the options";
}

// Boost.Program_options 1.74 loops forever in error_with_option_name::what() when a text it
// substitutes into its message template holds a placeholder ("batch = %value%": replacing
// "%value%" by "%value%" never ends). So what() is never called on such an error: the message
// is built here from the same parts, the way Boost words it.
struct ErrorParts : po::error_with_option_name {
  static const std::map<std::string, std::string>& of(const po::error_with_option_name& e) {
    return e.*(&ErrorParts::m_substitutions);
  }
};

std::string error_text(const po::error& e) {
  const auto* named = dynamic_cast<const po::error_with_option_name*>(&e);
  if (named == nullptr) return e.what();
  const auto& parts = ErrorParts::of(*named);
  const bool placeholder = std::any_of(parts.begin(), parts.end(), [](const auto& kv) {
    return kv.second.find('%') != std::string::npos;
  });
  if (!placeholder) return e.what();
  std::string name = named->get_option_name();
  if (name.empty()) {
    const auto token = parts.find("original_token");
    if (token != parts.end()) name = token->second;
  }
  if (dynamic_cast<const po::unknown_option*>(&e)) return "unrecognised option '" + name + "'";
  if (dynamic_cast<const po::multiple_occurrences*>(&e)) {
    return "option '" + name + "' cannot be specified more than once";
  }
  if (dynamic_cast<const po::multiple_values*>(&e)) {
    return "option '" + name + "' only takes a single argument";
  }
  const auto value = parts.find("value");
  if (value != parts.end()) {
    return "the argument ('" + value->second + "') for option '" + name + "' is invalid";
  }
  return "invalid option '" + name + "'";
}

[[noreturn]] void rethrow_command_line_error(const po::error& e, const Descriptions& d,
                                             const std::string& program) {
  std::string msg = std::string("command line: ") + error_text(e);
  if (const auto* unknown = dynamic_cast<const po::unknown_option*>(&e)) {
    msg += spelling_hint(unknown->get_option_name(), d, true);
  }
  throw OptionError(msg + help_hint(program));
}

[[noreturn]] void rethrow_file_error(const po::error& e, const Descriptions& d, const Sources& src,
                                     const std::string& program) {
  std::string where = src.file();
  std::string hint;
  if (const auto* syntax = dynamic_cast<const po::invalid_config_file_syntax*>(&e)) {
    const std::string line = syntax->tokens();
    if (auto n = src.find_line(line)) where += ", line " + std::to_string(*n);
    throw OptionError(where + ": invalid line '" + line +
                      "' (expected 'NAME = VALUE', a '# comment' or a blank line)");
  }
  if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&e)) {
    const std::string name = named->get_option_name();
    where = src.file_place(src.file_lines(name));
    if (dynamic_cast<const po::unknown_option*>(&e)) {
      if (name.find('.') != std::string::npos) {
        hint = " (" + program + "'s INI files have no [sections]: write 'NAME = VALUE' lines only)";
      } else if (name == "config" || name == "help" || name == "version") {
        hint = " ('" + name + "' is a command-line option only)";
      } else {
        hint = spelling_hint(name, d, false);
      }
    }
  }
  throw OptionError(where + ": " + error_text(e) + hint + help_hint(program));
}
}  // namespace

// ---------------------------------------------------------------------------------------
// Reading the values, each checked with a message that names it.

std::string OptionReader::path(const std::string& name) const {
  if (vm_.count(name) == 0) return {};
  const auto v = get<std::string>(name);
  if (v.empty()) fail(name, v, "an empty path (leave the option out for no file)");
  return v;
}

bool OptionReader::on_command_line(const std::string& name) const {
  return src_.on_command_line(name);
}

const std::string& OptionReader::file() const { return src_.file(); }

void OptionReader::fail(const std::string& name, const std::string& value,
                        const std::string& what) const {
  throw OptionError(src_.describe(name, value) + ": " + what);
}

OptionGroups::OptionGroups(const std::string& mesh_caption)
    : general(option_group("General")),
      mesh(option_group(mesh_caption)),
      run(option_group("Run")),
      overlap(option_group("Overlap (the CPU backend ignores the knobs marked CUDA only)")) {}

po::options_description option_group(const std::string& caption) {
  return po::options_description(caption, OptionGroups::kWidth, OptionGroups::kDescColumn);
}

// Bool options take a value (on|off, true|false, yes|no, 1|0) on the command line as in the
// file, so "--bias off" reads the same as "bias = off".
po::typed_value<bool>* bool_value(bool def) {
  return po::value<bool>()->value_name("on|off")->default_value(def, on_off(def));
}

SharedOptions read_shared_options(const OptionReader& r) {
  SharedOptions s;
  // mesh
  s.dp = r.at_least<int>("dp", 1, "must be at least 1 [ranks]");
  // run
  s.warmup = r.at_least<int>("warmup", 0, "must be 0 or more [iterations]");
  s.iterations = r.at_least<int>("iterations", 1, "must be at least 1 [iterations]");
  const auto backend_text = r.get<std::string>("backend");
  try {
    s.backend = parse_backend(backend_text);
  } catch (const Error& e) {
    r.fail("backend", backend_text, e.what());
  }
  s.gpu_sharing = r.get<bool>("gpu_sharing");
  s.timeout = r.get<double>("timeout");
  if (!std::isfinite(s.timeout) || s.timeout < 0) {
    r.fail("timeout", float_text(static_cast<float>(s.timeout)),
           "must be 0 (wait forever) or a positive number of seconds");
  }
  s.trace = r.path("trace");
  // overlap
  OverlapOptions& ov = s.overlap;
  const auto policy_text = r.get<std::string>("overlap");
  try {
    ov.policy = parse_overlap_policy(policy_text);
  } catch (const Error& e) {
    r.fail("overlap", policy_text, e.what());
  }
  ov.num_max_streams = r.at_least<int>("num_max_streams", 1, "must be at least 1 [streams]");
  ov.compute_stream_priority =
      r.at_least<int>("compute_stream_priority", 0, "must be 0 (highest) or more");
  ov.communication_stream_priority =
      r.at_least<int>("communication_stream_priority", 0, "must be 0 (highest) or more");
  ov.num_sm_for_communication =
      r.at_least<int>("num_sm_for_communication", 1, "must be at least 1 [SMs]");
  ov.use_ce = r.get<bool>("use_ce");
  ov.aggregate_all_gather = r.get<bool>("aggregate_all_gather");
  ov.chunks_per_rank = r.at_least<int>("chunks_per_rank", 1, "must be at least 1 [pieces]");
  s.config_file = r.file();
  return s;
}

namespace {

using Reader = OptionReader;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

GemmSpec parse_gemm_entry(const std::string& entry, const Reader& r) {
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

RunConfig read_config(const Reader& r) {
  RunConfig cfg;
  static_cast<SharedOptions&>(cfg) = read_shared_options(r);

  // mesh
  cfg.tp = r.at_least<int>("tp", 0, "must be 0 (world size / dp) or a positive number of ranks");

  // problem
  cfg.batch = r.at_least<int64_t>("batch", 1, "must be at least 1 [sequences]");
  cfg.seq_len = r.at_least<int64_t>("seq_len", 1, "must be at least 1 [tokens]");
  const int64_t hidden_in = r.at_least<int64_t>("hidden_in", 1, "must be at least 1 [elements]");
  const int64_t hidden_out = r.at_least<int64_t>("hidden_out", 1, "must be at least 1 [elements]");
  const auto collective_text = r.get<std::string>("collective");
  CollectiveOp collective = CollectiveOp::kAllGather;
  try {
    collective = parse_collective(collective_text);
  } catch (const Error& e) {
    r.fail("collective", collective_text, e.what());
  }

  const bool single_on_cli = r.on_command_line("collective") || r.on_command_line("hidden_in") ||
                             r.on_command_line("hidden_out");
  if (single_on_cli && r.on_command_line("gemm")) {
    throw OptionError(
        "--gemm and --collective/--hidden_in/--hidden_out were all given on the command line: "
        "give either --gemm entries (a block) or the single GEMM's options, not both");
  }
  if (single_on_cli || !r.has("gemm")) {
    cfg.gemms.push_back(
        GemmSpec{std::string(collective_name(collective)), collective, hidden_in, hidden_out});
  } else {
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

  // parse_dtype knows the FP8/FP4 types too; cgemm-run has no scaling options, so it runs
  // the unscaled ones only.
  const auto dtype_text = r.get<std::string>("dtype");
  constexpr std::array<std::string_view, 6> kRunDTypes{"bf16",     "fp16",    "fp32",
                                                       "bfloat16", "float16", "float32"};
  if (std::find(kRunDTypes.begin(), kRunDTypes.end(), dtype_text) == kRunDTypes.end()) {
    r.fail("dtype", dtype_text,
           "unknown dtype '" + dtype_text +
               "' (cgemm-run runs bf16, fp16, fp32, also spelled bfloat16, float16, float32)");
  }
  cfg.dtype = parse_dtype(dtype_text);
  cfg.bias = r.get<bool>("bias");
  cfg.transpose_batch_sequence = r.get<bool>("transpose_batch_sequence");
  cfg.std = r.get<float>("std");
  if (!(cfg.std > 0.0f) || !std::isfinite(cfg.std)) {
    r.fail("std", float_text(cfg.std), "must be a positive, finite standard deviation");
  }
  const auto seed_text = r.get<std::string>("seed");
  const auto seed = parse_integer<uint64_t>(seed_text);
  if (!seed) r.fail("seed", seed_text, "must be an unsigned 64-bit integer");
  cfg.seed = *seed;

  // run
  cfg.check = r.get<bool>("check");
  cfg.check_rounds = r.at_least<int>("check_rounds", 1, "must be at least 1 [rounds]");
  cfg.output_dump = r.path("output_dump");
  if (!cfg.output_dump.empty() && !cfg.check) {
    r.fail("output_dump", cfg.output_dump, "needs check = on (it dumps the checked outputs)");
  }
  cfg.report = r.path("report");
  cfg.dry_run = r.get<bool>("dry_run");
  cfg.ranks_per_node = r.at_least<int>("ranks_per_node", 0, "must be 0 or more [ranks]");
  cfg.gpus_per_node = r.at_least<int>("gpus_per_node", 0, "must be 0 or more [GPUs]");
  cfg.compute_capability =
      r.at_least<int>("compute_capability", 10, "must be a compute capability such as 90");

  // sweep
  cfg.sweep_csv = r.path("sweep_csv");
  cfg.sweep_jsonl = r.path("sweep_jsonl");

  check_distinct(output_files(cfg), {{"--config", cfg.config_file}});
  return cfg;
}

}  // namespace

namespace {

// Sweeps: these options may hold a comma-separated list (the experiments are the product).
const std::vector<std::string_view> kRunSweepable{"batch",
                                                  "seq_len",
                                                  "hidden_in",
                                                  "hidden_out",
                                                  "collective",
                                                  "dtype",
                                                  "bias",
                                                  "transpose_batch_sequence",
                                                  "std",
                                                  "seed",
                                                  "warmup",
                                                  "iterations",
                                                  "check",
                                                  "check_rounds",
                                                  "overlap",
                                                  "num_max_streams",
                                                  "compute_stream_priority",
                                                  "communication_stream_priority",
                                                  "num_sm_for_communication",
                                                  "use_ce",
                                                  "aggregate_all_gather",
                                                  "chunks_per_rank"};
// One job runs one mesh on one backend (one Context): these may not be swept.
const std::vector<std::string_view> kRunNotSweepable{"dp", "tp", "backend", "gpu_sharing"};

bool in(std::string_view name, const auto& names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

struct Axis {
  po::parsed_options* where;  // the command line's options or the file's
  size_t index;               // of the option in where->options
  std::string name;
  std::vector<std::string> values;
};

// The list options of `opts` (those the command line does not override, for the file's).
void find_axes(const ProgramSpec& spec, po::parsed_options& opts, bool from_file,
               const Sources& src, std::vector<Axis>& axes) {
  for (size_t i = 0; i < opts.options.size(); ++i) {
    const auto& o = opts.options[i];
    if (o.value.size() != 1 || o.value[0].find(',') == std::string::npos) continue;
    if (from_file && src.on_command_line(o.string_key)) continue;
    if (in(o.string_key, spec.not_sweepable)) {
      throw OptionError(src.describe(o.string_key, o.value[0]) +
                        ": the mesh and backend options (dp, tp, backend, gpu_sharing) may not "
                        "be swept: one job runs one mesh on one backend (start a job per mesh)");
    }
    if (!in(o.string_key, spec.sweepable)) continue;
    Axis a{&opts, i, o.string_key, {}};
    std::istringstream items(o.value[0]);
    for (std::string item; std::getline(items, item, ',');) a.values.push_back(trim(item));
    if (o.value[0].back() == ',') a.values.emplace_back();
    for (const auto& v : a.values) {
      if (v.empty()) {
        throw OptionError(src.describe(o.string_key, o.value[0]) +
                          ": an empty value in the list (sweep lists are 'A, B, C')");
      }
    }
    axes.push_back(std::move(a));
  }
}

}  // namespace

ParsedOptions parse_options(const ProgramSpec& spec, int argc, const char* const* argv,
                            const std::function<void(const OptionReader&)>& read) {
  const Descriptions d(spec);
  ParsedOptions result;
  Sources src;
  po::parsed_options cli(&d.command_line);
  try {
    namespace style = po::command_line_style;
    // No guessing: "--bat" is not "--batch"; the names are a contract.
    cli = po::command_line_parser(argc, argv)
              .options(d.command_line)
              .style(style::default_style & ~style::allow_guessing)
              .run();
    for (const auto& o : cli.options) {
      if (o.string_key.empty()) {
        const std::string token = o.original_tokens.empty() ? "" : o.original_tokens.front();
        throw OptionError("command line: unexpected argument '" + token +
                          "' (options are '--NAME VALUE'" + spec.positional_hint + ")" +
                          help_hint(spec.name));
      }
    }
    src.set_command_line(cli);
  } catch (const po::error& e) {
    rethrow_command_line_error(e, d, spec.name);
  }

  if (src.on_command_line("help")) {
    result.help = true;
    result.help_text = help_text(spec, d);
    return result;
  }
  if (src.on_command_line("version")) {
    result.help = true;
    result.help_text = spec.name + " " + CGEMM_VERSION + "\n";
    return result;
  }

  std::optional<po::parsed_options> file;
  for (const auto& o : cli.options) {
    if (o.string_key != "config" || o.value.empty() || file) continue;
    const std::string path = o.value.front();
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      throw OptionError("--config " + path + ": is a directory, not an INI file");
    }
    std::ifstream in(path);
    if (!in) {
      throw OptionError("--config " + path + ": cannot open the config file (" +
                        (std::filesystem::exists(path, ec) ? "not readable" : "no such file") +
                        ")");
    }
    std::ostringstream text;
    text << in.rdbuf();
    src.set_file(path, text.str());
    try {
      std::istringstream file_in(text.str());
      file = po::parse_config_file(file_in, d.file);
    } catch (const po::error& e) {
      rethrow_file_error(e, d, src, spec.name);
    }
  }

  std::vector<Axis> axes;
  find_axes(spec, cli, false, src, axes);
  if (file) find_axes(spec, *file, true, src, axes);
  // A block of gemm entries ignores the single GEMM's options unless the command line gives
  // them: a list on one of those would sweep nothing and label its rows falsely.
  const auto has_gemm = [](const po::parsed_options& o) {
    for (const auto& x : o.options) {
      if (x.string_key == "gemm") return true;
    }
    return false;
  };
  if (has_gemm(cli) || (file && has_gemm(*file))) {
    for (const auto& a : axes) {
      const bool single = a.name == "collective" || a.name == "hidden_in" || a.name == "hidden_out";
      if (single && !src.on_command_line(a.name)) {
        throw OptionError(src.describe(a.name, a.where->options[a.index].value[0]) +
                          ": the block of gemm entries defines the GEMMs, so a list here sweeps "
                          "nothing; sweep it on the command line (which replaces the block) or "
                          "drop the gemm entries");
      }
    }
  }
  size_t count = 1;
  for (const auto& a : axes) count *= a.values.size();
  for (const auto& a : axes) result.swept.push_back(a.name);

  // Every experiment is read and checked now: a bad value anywhere stops the job before the
  // first run. Experiment k takes value (k / stride) % size of each axis (the last is fastest).
  for (size_t k = 0; k < count; ++k) {
    std::string label;
    size_t stride = count;
    for (const auto& a : axes) {
      stride /= a.values.size();
      const std::string& v = a.values[(k / stride) % a.values.size()];
      a.where->options[a.index].value = {v};
      label += (label.empty() ? "" : " ") + a.name + "=" + v;
    }
    const std::string prefix = count == 1 ? ""
                                          : "experiment " + std::to_string(k + 1) + "/" +
                                                std::to_string(count) + " (" + label + "): ";
    try {
      po::variables_map vm;
      try {
        po::store(cli, vm);
      } catch (const po::error& e) {
        rethrow_command_line_error(e, d, spec.name);
      }
      if (file) {
        try {
          po::store(*file, vm);
        } catch (const po::error& e) {
          rethrow_file_error(e, d, src, spec.name);
        }
      }
      try {
        po::notify(vm);
      } catch (const po::error& e) {
        rethrow_command_line_error(e, d, spec.name);
      }
      read(OptionReader(vm, src));
      result.labels.push_back(label);
    } catch (const OptionError& e) {
      throw OptionError(prefix + e.what());
    }
  }
  return result;
}

namespace {

ProgramSpec run_program_spec() {
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
      "aggregate_all_gather and\nchunks_per_rank shape the schedule on both backends.\n\n"
      "Sweeps: batch, seq_len, hidden_in, hidden_out, collective, dtype, bias,\n"
      "transpose_batch_sequence, std, seed, warmup, iterations, check, check_rounds and the\n"
      "overlap options take a comma-separated list ('seq_len = 1024, 2048', or\n"
      "--collective all_gather,reduce_scatter). The lists expand to their product, one\n"
      "experiment each, run one after another in this job (the last list varies fastest);\n"
      "every experiment is checked before the first runs. dp, tp, backend and gpu_sharing\n"
      "may not be swept. Rank 0 prints a table, one row per experiment; --sweep_csv and\n"
      "--sweep_jsonl collect the rows. A sweep writes no --report, --trace or --output_dump.\n";
  spec.mesh_caption = "Mesh (world size = dp x tp; a TP group is tp consecutive ranks)";
  spec.positional_hint = "; quote a gemm entry: --gemm \"up_proj all_gather 768 3072\"";
  spec.defaults = RunConfig();
  spec.add_options = add_run_options;
  spec.sweepable = kRunSweepable;
  spec.not_sweepable = kRunNotSweepable;
  return spec;
}

}  // namespace

const std::vector<std::string_view>& run_sweepable_options() { return kRunSweepable; }

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

void resolve_mesh(RunConfig& cfg, int world_size) {
  const std::string world = std::to_string(world_size);
  if (world_size < 1) throw OptionError("world size " + world + ": must be at least 1");
  if (cfg.dp < 1) throw OptionError("--dp " + std::to_string(cfg.dp) + ": must be at least 1");
  if (cfg.tp < 0) {
    throw OptionError("--tp " + std::to_string(cfg.tp) + ": must be 0 (world size / dp) or more");
  }
  const std::string dp = std::to_string(cfg.dp);
  if (world_size % cfg.dp != 0) {
    throw OptionError("--dp " + dp + " does not divide the world size " + world);
  }
  if (cfg.tp == 0) {
    cfg.tp = world_size / cfg.dp;
  } else if (static_cast<int64_t>(cfg.tp) * cfg.dp != world_size) {
    throw OptionError("--tp " + std::to_string(cfg.tp) + " x --dp " + dp + " = " +
                      std::to_string(static_cast<int64_t>(cfg.tp) * cfg.dp) +
                      " ranks, but the world size is " + world + " (tp = 0 takes world size / dp)");
  }
  const std::string tp = std::to_string(cfg.tp);
  if (cfg.batch % cfg.dp != 0) {
    throw OptionError("--batch " + std::to_string(cfg.batch) + " is not divisible by --dp " + dp +
                      " (each data-parallel group runs batch / dp sequences)");
  }
  if (cfg.seq_len % cfg.tp != 0) {
    throw OptionError("--seq_len " + std::to_string(cfg.seq_len) + " is not divisible by tp " + tp +
                      " (the sequence is sharded over the tensor-parallel group)");
  }
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

std::string to_ini(const RunConfig& cfg) {
  std::ostringstream out;
  out << "# cgemm-run options (valid input to --config)\n";
  if (!cfg.config_file.empty()) out << "# read from " << cfg.config_file << "\n";
  out << "\n# Mesh\n";
  out << "dp = " << cfg.dp << "\n";
  out << "tp = " << cfg.tp << (cfg.tp == 0 ? "  # world size / dp" : "") << "\n";

  out << "\n# Problem\n";
  out << "batch = " << cfg.batch << "\n";
  out << "seq_len = " << cfg.seq_len << "\n";
  // A single GEMM named after its collective reads back from the scalar options; anything
  // else is written as gemm entries.
  if (cfg.gemms.size() == 1 &&
      cfg.gemms.front().name == collective_name(cfg.gemms.front().collective)) {
    const GemmSpec& g = cfg.gemms.front();
    out << "collective = " << collective_name(g.collective) << "\n";
    out << "hidden_in = " << g.hidden_in << "\n";
    out << "hidden_out = " << g.hidden_out << "\n";
  } else {
    for (const auto& g : cfg.gemms) {
      out << "gemm = " << g.name << " " << collective_name(g.collective) << " " << g.hidden_in
          << " " << g.hidden_out << "\n";
    }
  }
  out << "dtype = " << dtype_name(cfg.dtype) << "\n";
  out << "bias = " << on_off(cfg.bias) << "\n";
  out << "transpose_batch_sequence = " << on_off(cfg.transpose_batch_sequence) << "\n";
  out << "std = " << float_text(cfg.std) << "\n";
  out << "seed = " << cfg.seed << "\n";

  out << "\n# Run\n";
  out << "warmup = " << cfg.warmup << "\n";
  out << "iterations = " << cfg.iterations << "\n";
  out << "check = " << on_off(cfg.check) << "\n";
  out << "check_rounds = " << cfg.check_rounds << "\n";
  out << "timeout = " << cfg.timeout << "\n";
  if (cfg.output_dump.empty()) {
    out << "# output_dump = (none)\n";
  } else {
    out << "output_dump = " << cfg.output_dump << "\n";
  }
  out << "backend = " << backend_name(cfg.backend) << "\n";
  out << "gpu_sharing = " << on_off(cfg.gpu_sharing) << "\n";
  if (cfg.report.empty()) {
    out << "# report = (none)\n";
  } else {
    out << "report = " << cfg.report << "\n";
  }
  if (cfg.trace.empty()) {
    out << "# trace = (none)\n";
  } else {
    out << "trace = " << cfg.trace << "\n";
  }
  out << "dry_run = " << on_off(cfg.dry_run) << "\n";
  out << "ranks_per_node = " << cfg.ranks_per_node << "\n";
  out << "gpus_per_node = " << cfg.gpus_per_node << "\n";
  out << "compute_capability = " << cfg.compute_capability << "\n";

  const OverlapOptions& ov = cfg.overlap;
  out << "\n# Overlap\n";
  out << "overlap = " << overlap_policy_name(ov.policy) << "\n";
  out << "num_max_streams = " << ov.num_max_streams << "\n";
  out << "compute_stream_priority = " << ov.compute_stream_priority << "\n";
  out << "communication_stream_priority = " << ov.communication_stream_priority << "\n";
  out << "num_sm_for_communication = " << ov.num_sm_for_communication << "\n";
  out << "use_ce = " << on_off(ov.use_ce) << "\n";
  out << "aggregate_all_gather = " << on_off(ov.aggregate_all_gather) << "\n";
  out << "chunks_per_rank = " << ov.chunks_per_rank << "\n";

  out << "\n# Sweep\n";
  for (const auto& [name, path] :
       {std::pair<const char*, const std::string&>{"sweep_csv", cfg.sweep_csv},
        {"sweep_jsonl", cfg.sweep_jsonl}}) {
    if (path.empty()) {
      out << "# " << name << " = (none)\n";
    } else {
      out << name << " = " << path << "\n";
    }
  }
  return out.str();
}

}  // namespace cgemm::launcher
