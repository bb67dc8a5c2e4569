#include "csv_file.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cgemm/core/error.hpp"
#include "common/input_files.hpp"

namespace cgemm::launcher {

namespace {
std::vector<std::string> split_line(const std::string& line) {
  std::vector<std::string> v;
  std::stringstream in(line);
  for (std::string c; std::getline(in, c, ',');) v.push_back(c);
  return v;
}
}  // namespace

bool CsvFile::has(const std::string& name) const {
  return std::find(header.begin(), header.end(), name) != header.end();
}

size_t CsvFile::column(const std::string& name) const {
  auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end()) throw Error(option + ": '" + path + "' has no column '" + name + "'");
  return static_cast<size_t>(it - header.begin());
}

CsvFile read_csv(const std::string& option, const std::string& path) {
  require_regular_input(option, path);
  std::ifstream f(path);
  if (!f) throw Error(option + ": cannot read '" + path + "'");
  CsvFile csv{option, path, {}, {}};
  std::string line;
  if (!std::getline(f, line)) throw Error(option + ": '" + path + "' is empty");
  csv.header = split_line(line);
  while (std::getline(f, line)) {
    if (!line.empty()) csv.rows.push_back(split_line(line));
  }
  return csv;
}

}  // namespace cgemm::launcher
