#include "output_target.hpp"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "cgemm/core/error.hpp"

namespace cgemm::launcher {

namespace {

// Linux's own limit on the links of one path (ELOOP beyond it).
constexpr int kMaxLinks = 40;

// Why an existing `mode` cannot take an output.
std::string refusal(mode_t mode) {
  if (S_ISDIR(mode)) return "is a folder, not a file";
  const std::string instead = ": outputs go to regular files or character devices (/dev/null)";
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe), which waits for a reader" + instead;
  if (S_ISBLK(mode)) return "is a block device" + instead;
  if (S_ISSOCK(mode)) return "is a socket" + instead;
  return "is of an unknown kind" + instead;
}

// The file at the end of `path`'s chain of symlinks when that file does not exist yet: a
// dangling link is followed, so the output is created where it points.
std::string end_of_links(const std::string& head, const std::string& path) {
  std::string p = path;
  for (int hop = 0; hop <= kMaxLinks; ++hop) {
    struct stat st {};
    if (lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::string target(PATH_MAX, '\0');
    const ssize_t n = readlink(p.c_str(), target.data(), target.size());
    if (n <= 0 || static_cast<size_t>(n) >= target.size()) return p;
    target.resize(static_cast<size_t>(n));
    const std::filesystem::path dir = std::filesystem::path(p).parent_path();
    p = target.front() == '/' || dir.empty() ? target : (dir / target).string();
  }
  throw Error(head + "too many levels of symbolic links");
}

}  // namespace

OutputTarget output_target(const std::string& what, const std::string& path) {
  const std::string head = what + " " + path + ": ";
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ELOOP) throw Error(head + "too many levels of symbolic links");
    return {end_of_links(head, path), OutputTarget::kNew};
  }
  if (S_ISCHR(st.st_mode)) return {path, OutputTarget::kDevice};
  if (!S_ISREG(st.st_mode)) throw Error(head + refusal(st.st_mode));
  // The file itself, so that the temporary file and the rename happen in its folder.
  char* real = realpath(path.c_str(), nullptr);
  if (real == nullptr) return {path, OutputTarget::kFile};
  std::string file = real;
  std::free(real);
  return {file, OutputTarget::kFile};
}

}  // namespace cgemm::launcher
