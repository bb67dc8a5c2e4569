#pragma once
// Where each option's value came from (the command line, the --config file and its line, or
// the default), so that every message names the value as the user wrote it: "--batch 0",
// "batch = 0 (run.ini, line 7)", "batch = 0 (the default)".

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options/parsers.hpp>

namespace cgemm::launcher {

class OptionSources {
 public:
  void set_command_line(const boost::program_options::parsed_options& parsed);
  void set_file(std::string path, const std::string& text);

  bool on_command_line(const std::string& name) const { return cli_.count(name) > 0; }
  const std::string& file() const { return file_; }

  /// 1-based numbers of the lines of the file that set `name` (to `value`, when given), the
  /// way Boost reads them: '#' starts a comment, "[section]" prefixes the names that follow.
  std::vector<int> file_lines(const std::string& name,
                              const std::optional<std::string>& value = std::nullopt) const;
  /// 1-based number of the first line that reads as `text` once comments and blanks are cut.
  std::optional<int> find_line(const std::string& text) const;
  /// "run.ini, line 7" / "run.ini, lines 3, 9" / "run.ini".
  std::string file_place(const std::vector<int>& lines) const;
  /// "--batch 0", "batch = 0 (run.ini, line 7)" or "batch = 0 (the default)".
  std::string describe(const std::string& name, const std::string& value) const;

 private:
  std::set<std::string> cli_;
  std::string file_;
  std::vector<std::string> lines_;
};

/// `s` without leading and trailing blanks.
std::string trim(std::string_view s);

}  // namespace cgemm::launcher
