#pragma once
// The error of the launchers' options, in a header of its own so code that only throws it
// (output_files.cpp) does not pull in the option machinery (option_table.hpp).

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm::launcher {

/// Thrown for anything wrong in the options: the message names the option and the value.
/// The user's text in it (values, names, lines of the file) is shown escaped
/// (printable_text.hpp), so a NUL, a byte-order mark or an escape byte is seen, not obeyed.
class OptionError : public Error {
 public:
  explicit OptionError(const std::string& what);
};

}  // namespace cgemm::launcher
