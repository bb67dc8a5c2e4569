#include "input_files.hpp"

#include <sys/stat.h>

#include "option_table.hpp"

namespace cgemm::launcher {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "of an unknown kind";
}

}  // namespace

void require_regular_input(const std::string& what, const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  throw OptionError(what + " " + path + ": is " + kind_of(st.st_mode) + ", not a regular file");
}

}  // namespace cgemm::launcher
