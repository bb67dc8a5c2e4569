#pragma once
// The option machinery of the cgemm job programs (cgemm-run, cgemm-bench). An option is one
// row (OptionRow): its name, group, help, unit, default, reader with its checks, INI writer
// and whether it sweeps. Boost.Program_options' descriptions, the --help text, the reading,
// to_ini and the sweep list all come from the rows; a program is its rows plus the text
// around them (ProgramSpec).
//
// Every error is an OptionError whose message names the option and the value, and says where
// the value came from (option_sources.hpp).

#include <algorithm>
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <boost/program_options/variables_map.hpp>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cgemm/core/error.hpp"
#include "option_error.hpp"

namespace cgemm::launcher {

class OptionSources;

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
  T at_least(const std::string& name, T min, const std::string& what) const {
    const T v = get<T>(name);
    if (v < min) fail(name, std::to_string(v), what);
    return v;
  }
  /// A file option: none when not given; given empty, a bad option (not "no file").
  std::string path(const std::string& name) const;
  /// Whether the option has a value (given, or defaulted).
  bool has(const std::string& name) const { return vm_.count(name) > 0; }
  /// Whether the option was given (on the command line or in the file), not defaulted.
  bool given(const std::string& name) const { return has(name) && !vm_[name].defaulted(); }
  /// A list option's items (option_list.hpp: split at commas, trimmed, no empty item).
  std::vector<std::string> list(const std::string& name) const;
  bool on_command_line(const std::string& name) const;
  const std::string& file() const;  // the --config file; empty: none
  [[noreturn]] void fail(const std::string& name, const std::string& value,
                         const std::string& what) const;

 private:
  const boost::program_options::variables_map& vm_;
  const OptionSources& src_;
};

/// The groups of --help, in its order; the INI text (to_ini) has a section per group.
enum class OptionGroup { kGeneral, kMesh, kProblem, kRun, kOverlap, kBenchmark, kParts, kSweep };

/// Whether an option may hold a comma-separated list (a sweep: one experiment per value).
enum class Sweep {
  kPlain,    // commas reach the reader (a path, a list the option reads itself)
  kYes,      // a list sweeps it
  kRefused,  // a list is an error: one job runs one mesh on one backend
};

/// The JSON type of an option's value (sweep rows keep numbers as numbers, booleans as
/// booleans): its INI text read back as that type.
enum class ValueKind { kText, kInteger, kNumber, kBool };

/// One option of Config. `value` gives Boost's value, its default taken from the program's
/// defaults; null for a switch (--help). `read` stores the checked value into a Config;
/// `ini` writes its 'NAME = VALUE' line(s); null: not written (or written by another row).
template <typename Config>
struct OptionRow {
  std::string name;
  OptionGroup group = OptionGroup::kRun;
  std::string help;
  std::string unit;       // "[unit]" after the help; empty: none
  bool defaulted = true;  // false: "default: none" joins the unit
  Sweep sweep = Sweep::kPlain;
  std::function<boost::program_options::value_semantic*(const Config& defaults)> value;
  std::function<void(const OptionReader&, Config&)> read;
  std::function<void(std::ostream&, const Config&)> ini;
  ValueKind kind = ValueKind::kText;
};

/// What parse_options needs of a row: Boost's value bound to the program's defaults.
struct OptionEntry {
  std::string name;
  OptionGroup group;
  std::string text;  // the help with its unit
  Sweep sweep;
  std::function<boost::program_options::value_semantic*()> value;  // null: a switch
};

// ---------------------------------------------------------------------------------------
// Values and rows. A `field` is a callable `auto& (auto& config)` naming the value.

const char* on_off(bool b);
/// Shortest text that reads back as the same float (so to_ini round-trips exactly).
std::string float_text(float v);
/// A bool option: on|off, true|false, yes|no, 1|0, on the command line as in the file.
boost::program_options::typed_value<bool>* bool_value(bool def);

template <typename Config, typename T, typename Field>
OptionRow<Config> number_row(std::string name, OptionGroup group, const char* value_name,
                             std::string unit, std::string help, Field field, T min,
                             std::string what, Sweep sweep = Sweep::kYes) {
  OptionRow<Config> row{name, group, std::move(help), std::move(unit), true, sweep, {}, {}, {}};
  row.value = [field, value_name](const Config& d) {
    return boost::program_options::value<T>()->value_name(value_name)->default_value(field(d));
  };
  row.read = [=](const OptionReader& r, Config& c) { field(c) = r.at_least<T>(name, min, what); };
  row.ini = [=](std::ostream& out, const Config& c) { out << name << " = " << field(c) << "\n"; };
  row.kind = std::is_floating_point_v<T> ? ValueKind::kNumber : ValueKind::kInteger;
  return row;
}

template <typename Config, typename Field>
OptionRow<Config> bool_row(std::string name, OptionGroup group, std::string help, Field field,
                           Sweep sweep = Sweep::kYes) {
  OptionRow<Config> row{name, group, std::move(help), "", true, sweep, {}, {}, {}};
  row.value = [field](const Config& d) { return bool_value(field(d)); };
  row.read = [=](const OptionReader& r, Config& c) { field(c) = r.get<bool>(name); };
  row.ini = [=](std::ostream& out, const Config& c) {
    out << name << " = " << on_off(field(c)) << "\n";
  };
  row.kind = ValueKind::kBool;
  return row;
}

/// A file the program reads or writes; none unless given ("# NAME = (none)" in the INI).
template <typename Config, typename Field>
OptionRow<Config> path_row(std::string name, OptionGroup group, const char* value_name,
                           std::string help, Field field) {
  OptionRow<Config> row{name, group, std::move(help), "path", false, Sweep::kPlain, {}, {}, {}};
  row.value = [value_name](const Config&) {
    return boost::program_options::value<std::string>()->value_name(value_name);
  };
  row.read = [=](const OptionReader& r, Config& c) { field(c) = r.path(name); };
  row.ini = [=](std::ostream& out, const Config& c) {
    if (field(c).empty()) {
      out << "# " << name << " = (none)\n";
    } else {
      out << name << " = " << field(c) << "\n";
    }
  };
  return row;
}

/// Rows of a base of Config (the shared options) as rows of Config.
template <typename Config, typename Base>
std::vector<OptionRow<Config>> widen(const std::vector<OptionRow<Base>>& rows) {
  std::vector<OptionRow<Config>> out;
  for (const auto& b : rows) {
    OptionRow<Config> row{b.name, b.group, b.help, b.unit, b.defaulted, b.sweep, {}, {}, {}};
    if (b.value) row.value = b.value;
    if (b.read) row.read = b.read;
    if (b.ini) row.ini = b.ini;
    row.kind = b.kind;
    out.push_back(std::move(row));
  }
  return out;
}

/// A program's table: `shared` then `own`, grouped in --help order (stable within a group).
template <typename Config>
std::vector<OptionRow<Config>> table_of(std::vector<OptionRow<Config>> shared,
                                        const std::vector<OptionRow<Config>>& own) {
  shared.insert(shared.end(), own.begin(), own.end());
  std::stable_sort(shared.begin(), shared.end(),
                   [](const auto& a, const auto& b) { return a.group < b.group; });
  return shared;
}

/// The help text of a row: its help, then its unit and "default: none" in brackets.
std::string help_with_unit(const std::string& help, const std::string& unit, bool defaulted,
                           bool has_value);

template <typename Config>
std::vector<OptionEntry> entries_of(const std::vector<OptionRow<Config>>& rows,
                                    const Config& defaults) {
  std::vector<OptionEntry> out;
  for (const auto& row : rows) {
    OptionEntry e{row.name,
                  row.group,
                  help_with_unit(row.help, row.unit, row.defaulted, bool(row.value)),
                  row.sweep,
                  {}};
    if (row.value) e.value = [v = row.value, defaults] { return v(defaults); };
    out.push_back(std::move(e));
  }
  return out;
}

/// One experiment's Config: every row's reader, in table order, on a default Config.
template <typename Config>
Config read_rows(const std::vector<OptionRow<Config>>& rows, const OptionReader& r) {
  Config c;
  for (const auto& row : rows) {
    if (row.read) row.read(r, c);
  }
  return c;
}

/// The INI section title of a group ("Mesh", "Problem", ...).
const char* ini_section(OptionGroup g);

/// The rows' INI lines, a "# Section" header before each group that writes any.
template <typename Config>
void write_ini(std::ostream& out, const std::vector<OptionRow<Config>>& rows, const Config& c) {
  std::optional<OptionGroup> section;
  for (const auto& row : rows) {
    if (!row.ini) continue;
    if (section != row.group) {
      out << "\n# " << ini_section(row.group) << "\n";
      section = row.group;
    }
    row.ini(out, c);
  }
}

/// The names of the rows that sweep, in table order.
template <typename Config>
std::vector<std::string_view> sweepable(const std::vector<OptionRow<Config>>& rows) {
  std::vector<std::string_view> out;
  for (const auto& row : rows) {
    if (row.sweep == Sweep::kYes) out.emplace_back(row.name);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Parsing.

/// What makes a program: its name (in messages, --help and --version), its --help text
/// around the options, and its options.
struct ProgramSpec {
  std::string name;             // "cgemm-bench"
  std::string usage;            // --help: before the options
  std::string notes;            // --help: after them
  std::string mesh_caption;     // the Mesh group's title
  std::string problem_caption;  // the Problem group's title; empty: cgemm-run's GEMM
  std::string positional_hint;  // appended to "options are '--NAME VALUE'" for a stray argument
  std::vector<OptionEntry> options;
  /// Whether lists sweep (the rows' Sweep); false: commas reach the readers.
  bool sweeps = false;
};

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

}  // namespace cgemm::launcher
