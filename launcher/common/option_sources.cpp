#include "option_sources.hpp"

#include <sstream>
#include <utility>

namespace cgemm::launcher {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

void OptionSources::set_command_line(const boost::program_options::parsed_options& parsed) {
  for (const auto& o : parsed.options) cli_.insert(o.string_key);
}

void OptionSources::set_file(std::string path, const std::string& text) {
  file_ = std::move(path);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines_.push_back(line);
}

std::vector<int> OptionSources::file_lines(const std::string& name,
                                           const std::optional<std::string>& value) const {
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

std::optional<int> OptionSources::find_line(const std::string& text) const {
  for (size_t i = 0; i < lines_.size(); ++i) {
    std::string line = lines_[i];
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (trim(line) == text) return static_cast<int>(i + 1);
  }
  return std::nullopt;
}

std::string OptionSources::file_place(const std::vector<int>& lines) const {
  std::string out = file_;
  if (lines.empty()) return out;
  out += lines.size() == 1 ? ", line " : ", lines ";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(lines[i]);
  }
  return out;
}

std::string OptionSources::describe(const std::string& name, const std::string& value) const {
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

}  // namespace cgemm::launcher
