#pragma once
// One table definition, written as CSV, JSON (an array of objects, or one object per line),
// Markdown and a plain-text table in the style of nccl-tests, so a column is defined once for
// every format: cgemm-bench's results and cgemm-run's sweep rows.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace cgemm::launcher {

using Cell = std::variant<std::string, int64_t, double, bool>;

struct Column {
  enum Format : unsigned { kCsv = 1, kJson = 2, kText = 4, kAll = 7 };
  std::string name;         // CSV header and JSON key
  std::string title;        // Markdown and text header; empty: the name
  std::string unit;         // text tables show it in a second header line ("ms")
  int precision = 3;        // fixed digits of doubles in CSV; -1: the shortest exact text
  int text_precision = -1;  // ... in Markdown and text; -1: precision
  std::string text_suffix;  // appended to values in Markdown and text ("x")
  unsigned formats = kAll;  // the formats the column appears in
  // > 0: doubles keep at least this many significant digits in CSV, Markdown and text, so a
  // small figure (a CPU's 0.0012 TFLOP/s) is not printed as 0.0.
  int significant = 0;
};

/// `v` with `precision` fixed digits, or more where `significant` (> 0) digits need them.
std::string format_double(double v, int precision, int significant = 0);

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add(std::vector<Cell> row);  // one cell per column, in order
  const std::vector<Column>& columns() const { return columns_; }
  size_t size() const { return rows_.size(); }

  std::string csv_header() const;           // "a,b,c\n"
  std::string csv_row(size_t row) const;    // "1,x,0.500\n"
  std::string csv() const;                  // header and every row
  std::string json_line(size_t row) const;  // {"a":1,...}\n
  std::string json(int indent) const;       // [ {...}, ... ]\n
  std::string markdown() const;             // | a | b |\n|---|---|\n| ...
  /// nccl-tests style: "#" header lines (titles, units), then right-aligned rows.
  std::string text() const;

 private:
  std::string cell_text(const Column& c, const Cell& v, bool text) const;
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

}  // namespace cgemm::launcher
