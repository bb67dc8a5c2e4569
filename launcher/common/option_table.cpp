// The option machinery: the rows' descriptions for Boost.Program_options, --help, the command
// line and the INI file named by --config, parsed with Boost. The command line is stored
// first, so its values win; the file fills in the rest; the defaults fill in what neither
// gives. Boost's errors are reworded with the place of the value and a hint.

#include "option_table.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>

#include <boost/make_shared.hpp>
#include <boost/program_options.hpp>

#include "build_info.hpp"
#include "input_files.hpp"
#include "option_list.hpp"
#include "option_sources.hpp"
#include "option_sweep.hpp"
#include "printable_text.hpp"

namespace cgemm::launcher {

namespace po = boost::program_options;

OptionError::OptionError(const std::string& what) : Error(printable(what)) {}

const char* on_off(bool b) { return b ? "on" : "off"; }

std::string float_text(float v) {
  std::array<char, 32> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  if (ec != std::errc()) return std::to_string(v);
  return std::string(buf.data(), end);
}

namespace {

// Boost reads an empty boolean ("--bias ''", "bias =") as true; an empty value of any other
// option is refused, so an empty boolean is refused the same way (Boost's "the argument for
// option '--bias' is invalid"), not taken as on.
class OnOffValue : public po::typed_value<bool> {
 public:
  OnOffValue() : po::typed_value<bool>(nullptr) {}
  void xparse(boost::any& store, const std::vector<std::string>& tokens) const override {
    if (tokens.size() == 1 && trim(tokens.front()).empty()) {
      throw po::invalid_option_value(tokens.front());
    }
    po::typed_value<bool>::xparse(store, tokens);
  }
};

}  // namespace

// Bool options take a value (on|off, true|false, yes|no, 1|0) on the command line as in the
// file, so "--bias off" reads the same as "bias = off".
po::typed_value<bool>* bool_value(bool def) {
  return (new OnOffValue())->value_name("on|off")->default_value(def, on_off(def));
}

std::string help_with_unit(const std::string& help, const std::string& unit, bool defaulted,
                           bool has_value) {
  std::string bracket = unit;
  if (has_value && !defaulted)
    bracket += (bracket.empty() ? "" : "; ") + std::string("default: none");
  return bracket.empty() ? help : help + " [" + bracket + "]";
}

const char* ini_section(OptionGroup g) {
  switch (g) {
    case OptionGroup::kGeneral:
      return "General";
    case OptionGroup::kMesh:
      return "Mesh";
    case OptionGroup::kProblem:
      return "Problem";
    case OptionGroup::kRun:
      return "Run";
    case OptionGroup::kOverlap:
      return "Overlap";
    case OptionGroup::kBenchmark:
      return "Benchmark";
    case OptionGroup::kParts:
      return "Parts";
    case OptionGroup::kSweep:
      return "Sweep";
  }
  return "";
}

namespace {

constexpr unsigned kWidth = 100;  // help text columns
constexpr unsigned kDescColumn = 50;

std::string caption(OptionGroup g, const ProgramSpec& spec) {
  switch (g) {
    case OptionGroup::kMesh:
      return spec.mesh_caption;
    case OptionGroup::kProblem:
      return spec.problem_caption.empty()
                 ? "Problem (x [batch, seq_len, hidden_in] @ w [hidden_in, hidden_out])"
                 : spec.problem_caption;
    case OptionGroup::kOverlap:
      return "Overlap (the CPU backend ignores the knobs marked CUDA only)";
    case OptionGroup::kParts:
      return "Parts (one rank; instead of the sweep)";
    case OptionGroup::kSweep:
      return "Sweep (comma-separated lists of values: one experiment per combination)";
    default:
      return ini_section(g);
  }
}

// A program's descriptions: its groups in --help order, and the descriptions the parsers
// take (the file's without the General group: --config, --help and --version).
struct Descriptions {
  explicit Descriptions(const ProgramSpec& spec) {
    for (const OptionEntry& e : spec.options) {
      if (groups.empty() || groups.back().first != e.group) {
        groups.emplace_back(e.group,
                            po::options_description(caption(e.group, spec), kWidth, kDescColumn));
      }
      const po::value_semantic* value = e.value ? e.value() : new po::untyped_value(true);
      groups.back().second.add(
          boost::make_shared<po::option_description>(e.name.c_str(), value, e.text.c_str()));
    }
    for (const auto& [group, desc] : groups) {
      if (group != OptionGroup::kGeneral) file.add(desc);
      all.add(desc);
    }
  }
  std::vector<std::pair<OptionGroup, po::options_description>> groups;
  po::options_description all{kWidth, kDescColumn};   // the command line's, and --help's
  po::options_description file{kWidth, kDescColumn};  // no General
};

std::string help_text(const ProgramSpec& spec, const Descriptions& d) {
  std::ostringstream out;
  // One description holding the groups, so that every group lines up in the same columns.
  out << spec.usage << d.all << "\n" << spec.notes;
  return out.str();
}

// ---------------------------------------------------------------------------------------
// Boost's errors, with a hint.

// "--seq-len" -> " (did you mean --seq_len?)": dashes for underscores, or a unique prefix.
std::string spelling_hint(std::string name, const Descriptions& d, bool dashes) {
  name.erase(0, name.find_first_not_of('-'));
  std::string underscored = name;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  std::vector<std::string> candidates;
  for (const auto& opt : d.all.options()) {
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

[[noreturn]] void rethrow_file_error(const po::error& e, const Descriptions& d,
                                     const OptionSources& src, const std::string& program) {
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

po::parsed_options parse_command_line(const ProgramSpec& spec, const Descriptions& d, int argc,
                                      const char* const* argv) {
  try {
    namespace style = po::command_line_style;
    // No guessing: "--bat" is not "--batch"; the names are a contract.
    po::parsed_options cli = po::command_line_parser(argc, argv)
                                 .options(d.all)
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
    return cli;
  } catch (const po::error& e) {
    rethrow_command_line_error(e, d, spec.name);
  }
}

// A NUL byte means the file is not text (a binary given as --config); refused with its line
// before Boost reads it, as every message after this would be cut at the NUL wherever it
// passes through a C string (what()).
void refuse_nul(const std::string& path, const std::string& text) {
  const size_t at = text.find('\0');
  if (at == std::string::npos) return;
  const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at) + 1;
  const size_t end = text.find('\n', at);
  const int line = static_cast<int>(std::count(text.begin(), text.begin() + begin, '\n')) + 1;
  throw OptionError(path + ", line " + std::to_string(line) + ": a NUL byte in '" +
                    text.substr(begin, end == std::string::npos ? end : end - begin) +
                    "' (an INI file is text: 'NAME = VALUE' lines)");
}

// The --config file of the command line, parsed; none when not given.
std::optional<po::parsed_options> parse_config_file(const ProgramSpec& spec, const Descriptions& d,
                                                    const po::parsed_options& cli,
                                                    OptionSources& src) {
  for (const auto& o : cli.options) {
    if (o.string_key != "config" || o.value.empty()) continue;
    const std::string path = o.value.front();
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      throw OptionError("--config " + path + ": is a directory, not an INI file");
    }
    require_regular_input("--config", path);
    std::ifstream in(path);
    if (!in) {
      throw OptionError("--config " + path + ": cannot open the config file (" +
                        (std::filesystem::exists(path, ec) ? "not readable" : "no such file") +
                        ")");
    }
    std::ostringstream text;
    text << in.rdbuf();
    refuse_nul(path, text.str());
    src.set_file(path, text.str());
    try {
      std::istringstream file_in(text.str());
      return po::parse_config_file(file_in, d.file);
    } catch (const po::error& e) {
      rethrow_file_error(e, d, src, spec.name);
    }
  }
  return std::nullopt;
}

bool has_option(const po::parsed_options& o, const std::string& name) {
  return std::any_of(o.options.begin(), o.options.end(),
                     [&](const auto& x) { return x.string_key == name; });
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

std::vector<std::string> OptionReader::list(const std::string& name) const {
  const auto text = get<std::string>(name);
  return list_items(text, src_.describe(name, text));
}

bool OptionReader::on_command_line(const std::string& name) const {
  return src_.on_command_line(name);
}

const std::string& OptionReader::file() const { return src_.file(); }

void OptionReader::fail(const std::string& name, const std::string& value,
                        const std::string& what) const {
  throw OptionError(src_.describe(name, value) + ": " + what);
}

ParsedOptions parse_options(const ProgramSpec& spec, int argc, const char* const* argv,
                            const std::function<void(const OptionReader&)>& read) {
  const Descriptions d(spec);
  ParsedOptions result;
  OptionSources src;
  po::parsed_options cli = parse_command_line(spec, d, argc, argv);
  src.set_command_line(cli);
  if (src.on_command_line("help")) {
    result.help = true;
    result.help_text = help_text(spec, d);
    return result;
  }
  if (src.on_command_line("version")) {
    result.help = true;
    result.help_text = build_info::version_line(spec.name);
    return result;
  }
  std::optional<po::parsed_options> file = parse_config_file(spec, d, cli, src);

  std::vector<SweepAxis> axes;
  find_axes(spec, cli, false, src, axes);
  if (file) find_axes(spec, *file, true, src, axes);
  refuse_axes_beside_block(axes, has_option(cli, "gemm") || (file && has_option(*file, "gemm")),
                           src);
  const size_t count = experiment_count(axes);
  for (const auto& a : axes) result.swept.push_back(a.name);

  // Every experiment is read and checked now: a bad value anywhere stops the job before the
  // first run.
  for (size_t k = 0; k < count; ++k) {
    const std::string label = select_experiment(axes, k);
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

}  // namespace cgemm::launcher
