#include "report_json.hpp"

#include <charconv>
#include <ctime>
#include <sstream>
#include <string>

#include "build_info.hpp"
#include "plan_schema.hpp"

namespace cgemm::launcher {
namespace {

// A value as the INI writes it, typed: on/off a boolean, a number a number, else a string.
nlohmann::json typed(const std::string& text) {
  if (text == "on") return true;
  if (text == "off") return false;
  const char* end = text.data() + text.size();
  int64_t i = 0;
  if (auto [p, ec] = std::from_chars(text.data(), end, i); ec == std::errc() && p == end) return i;
  uint64_t u = 0;  // a seed beyond int64's range
  if (auto [p, ec] = std::from_chars(text.data(), end, u); ec == std::errc() && p == end) return u;
  double d = 0;
  if (auto [p, ec] = std::from_chars(text.data(), end, d); ec == std::errc() && p == end) return d;
  return text;
}

// One row's INI lines into `out`: "NAME = VALUE  # note" and "# NAME = (none)" (null).
void add_ini_lines(const std::string& lines, bool is_path, nlohmann::json& out) {
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);) {
    const bool none = line.rfind("# ", 0) == 0 && line.ends_with(" = (none)");
    if (none) line = line.substr(2);
    const size_t eq = line.find(" = ");
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    const std::string name = line.substr(0, eq);
    if (none) {
      out[name] = nullptr;
      continue;
    }
    std::string value = line.substr(eq + 3);
    value = value.substr(0, value.find("  #"));
    // A path stays text even when it looks like a number.
    out[name] = is_path ? nlohmann::json(value) : typed(value);
  }
}

}  // namespace

nlohmann::json spec_json(const PartitionSpec& spec) { return plan::spec_to_json(spec); }

nlohmann::json config_json(const RunConfig& cfg) {
  nlohmann::json out = nlohmann::json::object();
  out["config"] =
      cfg.config_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(cfg.config_file);
  for (const auto& row : run_rows()) {
    if (row.name == "gemm") {
      // The block whatever wrote it (--collective/--hidden_* or gemm lines).
      nlohmann::json block = nlohmann::json::array();
      for (const GemmSpec& g : cfg.gemms) {
        block.push_back({{"name", g.name},
                         {"collective", collective_name(g.collective)},
                         {"hidden_in", g.hidden_in},
                         {"hidden_out", g.hidden_out}});
      }
      out["gemm"] = block;
      continue;
    }
    if (!row.ini) continue;
    std::ostringstream lines;
    row.ini(lines, cfg);
    add_ini_lines(lines.str(), row.unit == "path", out);
  }
  return out;
}

nlohmann::json provenance_json() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"version", build_info::version()}, {"commit", build_info::commit()}, {"time", when}};
}

}  // namespace cgemm::launcher
