#include "sweep_rows.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <sstream>
#include <variant>

namespace cgemm::launcher {

namespace {

std::string joined(const RunConfig& cfg, const std::function<std::string(const GemmSpec&)>& f) {
  std::string out;
  for (const GemmSpec& g : cfg.gemms) out += (out.empty() ? "" : "+") + f(g);
  return out;
}

// The GEMM's sizes: a number for a single GEMM, the block's values joined by '+' otherwise.
Cell sizes(const RunConfig& cfg, int64_t GemmSpec::*size) {
  if (cfg.gemms.size() == 1) return cfg.gemms.front().*size;
  return joined(cfg, [&](const GemmSpec& g) { return std::to_string(g.*size); });
}

// The value of an INI line "name = value  # note".
std::string ini_text(const OptionRow<RunConfig>& row, const RunConfig& cfg) {
  std::ostringstream out;
  row.ini(out, cfg);
  std::string v = out.str();
  const std::string head = row.name + " = ";
  v = v.rfind(head, 0) == 0 ? v.substr(head.size()) : v;
  v = v.substr(0, v.find('\n'));
  return v.substr(0, v.find("  #"));
}

Cell typed(const std::string& text, ValueKind kind) {
  switch (kind) {
    case ValueKind::kBool:
      return text == "on";
    case ValueKind::kInteger: {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec == std::errc() && end == text.data() + text.size()) return v;
      return text;  // a seed above 2^63 stays exact as text
    }
    case ValueKind::kNumber:
      return std::stod(text);
    case ValueKind::kText:
      break;
  }
  return text;
}

// The sweepable options that have no column of their own below (the GEMM's sizes do).
std::vector<std::string> option_columns() {
  std::vector<std::string> out;
  for (std::string_view name : run_sweepable_options()) {
    if (name != "batch" && name != "seq_len" && name != "hidden_in" && name != "hidden_out" &&
        name != "collective") {
      out.emplace_back(name);
    }
  }
  return out;
}

const std::vector<std::string>& sweep_options() {
  static const std::vector<std::string> names = option_columns();
  return names;
}

}  // namespace

Cell option_cell(const std::string& name, const RunConfig& cfg) {
  if (name == "hidden_in") return sizes(cfg, &GemmSpec::hidden_in);
  if (name == "hidden_out") return sizes(cfg, &GemmSpec::hidden_out);
  if (name == "collective") {
    return joined(cfg,
                  [](const GemmSpec& g) { return std::string(collective_name(g.collective)); });
  }
  for (const auto& row : run_rows()) {
    if (row.name == name && row.ini) return typed(ini_text(row, cfg), row.kind);
  }
  throw Error("option_cell: no option '" + name + "' with a value");
}

Table sweep_table(const std::vector<std::string>& swept) {
  const auto shown = [&](const std::string& name, bool always = false) {
    const bool on = always || std::find(swept.begin(), swept.end(), name) != swept.end();
    return on ? Column::kAll : Column::kCsv | Column::kJson;
  };
  std::vector<Column> c{{"experiment", "#", "", 0, -1, "", Column::kAll},
                        {"swept", "", "", 0, -1, "", Column::kCsv | Column::kJson},
                        {"gemms", "", "", 0, -1, "", shown("gemm")},
                        {"collective", "", "", 0, -1, "", shown("collective", true)},
                        {"batch", "B", "", 0, -1, "", shown("batch", true)},
                        {"seq_len", "S", "", 0, -1, "", shown("seq_len", true)},
                        {"hidden_in", "K", "", 0, -1, "", shown("hidden_in", true)},
                        {"hidden_out", "N", "", 0, -1, "", shown("hidden_out", true)}};
  // Option values print as given (-1: the shortest exact text of a number).
  for (const std::string& name : sweep_options())
    c.push_back({name, "", "", -1, -1, "", shown(name)});
  for (Column col :
       std::vector<Column>{{"dp", "", "", 0, -1, "", Column::kCsv | Column::kJson},
                           {"tp", "", "", 0, -1, "", Column::kCsv | Column::kJson},
                           {"backend", "", "", 0, -1, "", Column::kCsv | Column::kJson},
                           {"overlapped_ms", "overlapped", "(ms)", 4, 3, "", Column::kAll},
                           {"sequential_ms", "sequential", "(ms)", 4, 3, "", Column::kAll},
                           {"speedup", "speed-up", "", 3, 2, "", Column::kAll},
                           {"tflops_per_rank", "TFLOP/s", "(rank)", 3, 2, "", Column::kAll},
                           {"check_result", "check", "", 0, -1, "", Column::kAll},
                           {"failures", "#wrong", "", 0, -1, "", Column::kAll}}) {
    c.push_back(col);
  }
  return Table(std::move(c));
}

std::vector<Cell> sweep_row(size_t index, const std::string& label, const RunConfig& cfg,
                            const SweepResult& r) {
  std::vector<Cell> row{static_cast<int64_t>(index + 1),
                        label,
                        joined(cfg, [](const GemmSpec& g) { return g.name; }),
                        option_cell("collective", cfg),
                        cfg.batch,
                        cfg.seq_len,
                        option_cell("hidden_in", cfg),
                        option_cell("hidden_out", cfg)};
  for (const std::string& name : sweep_options()) row.push_back(option_cell(name, cfg));
  const double over = r.overlapped_ms, seq = r.sequential_ms;
  for (Cell v : std::vector<Cell>{
           int64_t{r.dp}, int64_t{r.tp}, r.backend, over, seq, over > 0 ? seq / over : 0.0,
           over > 0 ? r.flops / (over * 1e-3) / 1e12 : 0.0, r.check, r.failures}) {
    row.push_back(std::move(v));
  }
  return row;
}

std::string sweep_ini(const std::vector<RunConfig>& experiments,
                      const std::vector<std::string>& swept) {
  std::string ini = to_ini(experiments.front());
  std::string notes;
  for (const std::string& name : swept) {
    const OptionRow<RunConfig>* row = nullptr;
    for (const auto& r : run_rows()) {
      if (r.name == name && r.ini) row = &r;
    }
    std::vector<std::string> values;
    for (const RunConfig& cfg : experiments) {
      const Cell c = option_cell(name, cfg);
      std::string v = row != nullptr                       ? ini_text(*row, cfg)
                      : std::holds_alternative<int64_t>(c) ? std::to_string(std::get<int64_t>(c))
                                                           : std::get<std::string>(c);
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
    std::string list;
    for (const std::string& v : values) list += (list.empty() ? "" : ", ") + v;
    const size_t at = ini.find("\n" + name + " = ");
    if (at == std::string::npos) {
      notes += "# swept: " + name + " = " + list + "\n";
      continue;
    }
    const size_t end = ini.find('\n', at + 1);
    ini.replace(at + 1, end - at - 1, name + " = " + list);
  }
  return notes + ini;
}

std::string experiment_line(size_t index, size_t count, const std::string& label,
                            const SweepResult& r) {
  char line[256];
  const double over = r.overlapped_ms, seq = r.sequential_ms;
  std::snprintf(line, sizeof(line),
                ": overlapped %.3f ms, sequential %.3f ms, speed-up %.2fx, check %s", over, seq,
                over > 0 ? seq / over : 0.0, r.check.c_str());
  return "experiment " + std::to_string(index + 1) + "/" + std::to_string(count) + ": " + label +
         line;
}

}  // namespace cgemm::launcher
