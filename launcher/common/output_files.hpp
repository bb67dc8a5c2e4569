#pragma once
// Output files of cgemm-run and cgemm-bench (reports, traces and their SVG, output dumps, bench
// tables, sweep rows): the rules they share.
//
// - No output may name an input (--config, --peers) or another output: a bad option.
// - Every output is checked writable before the run, without creating or truncating it.
// - Reports, traces, dumps and tables are written to a temporary file in the same folder and
//   renamed into place: a failed run leaves the old file as it was, never an empty one.
//   (Sweep rows are appended instead, each whole or not at all.)
// - A symlink is followed: the file it names is replaced, in that file's folder. A character
//   device (/dev/null, a terminal) is written in place. A FIFO, socket or block device is
//   refused (output_target.hpp); so is a folder.
// - A temporary file a killed run left is removed by the next run writing the same output
//   (temp_files.hpp).

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace cgemm::launcher {

/// A file an option names. `option` is how messages name it ("--report", "--trace's SVG").
struct NamedPath {
  std::string option;
  std::string path;
  bool appended = false;  // written by appending (sweep rows), not replaced
};

/// Throws OptionError when an output names an input or another output (one message naming
/// both options). Empty paths are skipped.
void check_distinct(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

/// Throws cgemm::Error unless `out.path` can be written: it is a file or a character device
/// (not a folder, FIFO, socket or block device), its folder exists, an existing file is
/// writable, and (for replaced files) a file can be made in the folder. Opens no device, and
/// creates nothing that stays: the probe file is removed at once.
void check_writable(const NamedPath& out);

/// Writes `body`'s output to a temporary file beside `path` (beside the file a symlink names),
/// then renames it onto that file; a character device is written in place. On any failure the
/// temporary file is removed, the file is untouched, and cgemm::Error names `what`, the path
/// and the reason ("No space left on device").
void write_replacing(const std::string& what, const std::string& path,
                     const std::function<void(std::ostream&)>& body);
void write_replacing(const std::string& what, const std::string& path, const std::string& text);

/// Appends `text` (whole lines) to `path` with one write(2) and closes it: a row is either
/// there whole or absent (a failed write is cut back off the file). Creates the file. Throws
/// cgemm::Error naming `what`, the path and the reason ("No space left on device").
void append_text(const std::string& what, const std::string& path, const std::string& text);
/// The --help paragraph on what a file option may name.
std::string file_notes();

/// The first line of `path` without its newline; empty when the file is missing, empty or not
/// a regular file (a terminal would wait for input).
std::string first_line(const std::string& path);

}  // namespace cgemm::launcher
