#pragma once
// A small CSV file read whole, with columns found by header name: what cgemm-bench reads from
// its peer scripts (bench/peers/*.py write plain comma-separated fields, no quoting).

#include <string>
#include <vector>

namespace cgemm::launcher {

struct CsvFile {
  std::string option, path;  // for messages: the option that named the file, and the file
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // non-empty lines after the header, split
  /// The index of column `name`; throws cgemm::Error "OPTION: 'PATH' has no column 'NAME'".
  size_t column(const std::string& name) const;
  /// Whether the header names column `name` (a file whose kind its columns tell).
  bool has(const std::string& name) const;
};

/// Reads `path`; throws cgemm::Error naming `option` and the file when it cannot be read or
/// has no header line.
CsvFile read_csv(const std::string& option, const std::string& path);

}  // namespace cgemm::launcher
