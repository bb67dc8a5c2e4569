#include "table.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm::launcher {

namespace {

const std::string& title_of(const Column& c) { return c.title.empty() ? c.name : c.title; }

}  // namespace

std::string format_double(double v, int precision, int significant) {
  if (significant > 0 && v != 0 && std::isfinite(v)) {
    const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(v))));
    precision = std::max(precision, significant - 1 - magnitude);
  }
  std::ostringstream s;
  if (precision < 0) {  // the shortest text that reads back as v (option values: 0.023)
    s.precision(17);
    s << v;
    for (int p = 1; p < 17; ++p) {
      std::ostringstream t;
      t.precision(p);
      t << v;
      if (std::stod(t.str()) == v) return t.str();
    }
    return s.str();
  }
  s.setf(std::ios::fixed);
  s.precision(precision);
  s << v;
  return s.str();
}

void Table::add(std::vector<Cell> row) {
  if (row.size() != columns_.size()) {
    throw Error("table row of " + std::to_string(row.size()) + " cells for " +
                std::to_string(columns_.size()) + " columns");
  }
  rows_.push_back(std::move(row));
}

std::string Table::cell_text(const Column& c, const Cell& v, bool text) const {
  std::string out;
  if (const auto* s = std::get_if<std::string>(&v)) {
    out = *s;
  } else if (const auto* i = std::get_if<int64_t>(&v)) {
    out = std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    out = format_double(*d, text && c.text_precision >= 0 ? c.text_precision : c.precision,
                        c.significant);
  } else {
    out = std::get<bool>(v) ? "true" : "false";
  }
  return text ? out + c.text_suffix : out;
}

std::string Table::csv_header() const {
  std::string out;
  for (const Column& c : columns_) {
    if (!(c.formats & Column::kCsv)) continue;
    out += (out.empty() ? "" : ",") + c.name;
  }
  return out + "\n";
}

std::string Table::csv_row(size_t row) const {
  std::string out;
  bool first = true;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (!(columns_[i].formats & Column::kCsv)) continue;
    std::string v = cell_text(columns_[i], rows_[row][i], false);
    if (v.find_first_of(",\"\n") != std::string::npos) {  // RFC 4180 quoting
      std::string q = "\"";
      for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      v = q + "\"";
    }
    out += (first ? "" : ",") + v;
    first = false;
  }
  return out + "\n";
}

std::string Table::csv() const {
  std::string out = csv_header();
  for (size_t r = 0; r < rows_.size(); ++r) out += csv_row(r);
  return out;
}

namespace {
nlohmann::json object_of(const std::vector<Column>& columns, const std::vector<Cell>& row) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < columns.size(); ++i) {
    if (!(columns[i].formats & Column::kJson)) continue;
    std::visit([&](const auto& v) { j[columns[i].name] = v; }, row[i]);
  }
  return j;
}
}  // namespace

std::string Table::json_line(size_t row) const {
  return object_of(columns_, rows_[row]).dump() + "\n";
}

std::string Table::json(int indent) const {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& row : rows_) a.push_back(object_of(columns_, row));
  return a.dump(indent) + "\n";
}

std::string Table::markdown() const {
  std::string head = "|", rule = "|";
  for (const Column& c : columns_) {
    if (!(c.formats & Column::kText)) continue;
    head += " " + title_of(c) + " |";
    rule += "---|";
  }
  std::string out = head + "\n" + rule + "\n";
  for (const auto& row : rows_) {
    out += "|";
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (columns_[i].formats & Column::kText)
        out += " " + cell_text(columns_[i], row[i], true) + " |";
    }
    out += "\n";
  }
  return out;
}

std::string Table::text() const {
  std::vector<size_t> shown;
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].formats & Column::kText) shown.push_back(i);
  }
  std::vector<std::vector<std::string>> cells(rows_.size());
  std::vector<size_t> width;
  for (size_t i : shown) {
    width.push_back(std::max(title_of(columns_[i]).size(), columns_[i].unit.size()));
  }
  for (size_t r = 0; r < rows_.size(); ++r) {
    for (size_t k = 0; k < shown.size(); ++k) {
      cells[r].push_back(cell_text(columns_[shown[k]], rows_[r][shown[k]], true));
      width[k] = std::max(width[k], cells[r].back().size());
    }
  }
  const auto line = [&](const std::string& lead, const auto& value_of) {
    std::string out = lead;
    for (size_t k = 0; k < shown.size(); ++k) {
      const std::string v = value_of(k);
      out += " " + std::string(width[k] - std::min(width[k], v.size()), ' ') + v;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line("#", [&](size_t k) { return title_of(columns_[shown[k]]); });
  out += line("#", [&](size_t k) { return columns_[shown[k]].unit; });
  for (size_t r = 0; r < rows_.size(); ++r) {
    out += line(" ", [&](size_t k) { return cells[r][k]; });
  }
  return out;
}

}  // namespace cgemm::launcher
