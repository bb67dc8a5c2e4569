#include "output_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>

#include "run_config.hpp"

namespace cgemm::launcher {

namespace fs = std::filesystem;

namespace {

// The path with symlinks and "." / ".." resolved as far as it exists, for comparing.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? fs::path(path).lexically_normal() : p;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;  // both exist: hard links too
  return resolved(a) == resolved(b);
}

fs::path folder_of(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

std::string errno_text() { return std::strerror(errno); }

// A new, empty file beside `path` (mode 0600); its name goes to `tmp`. -1 when none can be made.
int make_temp_beside(const std::string& path, std::string& tmp) {
  tmp = (folder_of(path) / ("." + fs::path(path).filename().string() + ".tmp-XXXXXX")).string();
  return mkstemp(tmp.data());
}

}  // namespace

void check_distinct(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (out.path.empty()) continue;
    for (const NamedPath& in : inputs) {
      if (!in.path.empty() && same_file(out.path, in.path)) {
        throw OptionError(out.option + " " + out.path + " names the input file of " + in.option +
                          " " + in.path + ": an output must not overwrite an input");
      }
    }
    for (size_t k = 0; k < i; ++k) {
      const NamedPath& other = outputs[k];
      if (!other.path.empty() && same_file(out.path, other.path)) {
        throw OptionError(out.option + " " + out.path + " names the same file as " + other.option +
                          " " + other.path + ": give each output its own file");
      }
    }
  }
}

void check_writable(const NamedPath& out) {
  const std::string head = out.option + " " + out.path + ": ";
  std::error_code ec;
  if (fs::is_directory(out.path, ec)) throw Error(head + "is a folder, not a file");
  const fs::path dir = folder_of(out.path);
  if (!fs::is_directory(dir, ec)) {
    throw Error(head + "cannot write there: no such folder '" + dir.string() + "'");
  }
  const bool exists = fs::exists(out.path, ec);
  if (exists && access(out.path.c_str(), W_OK) != 0) {
    throw Error(head + "the file is not writable (" + errno_text() + ")");
  }
  if (out.appended && exists) return;
  // Replaced files are written beside the target and renamed: the folder must take a file.
  std::string tmp;
  const int fd = make_temp_beside(out.path, tmp);
  if (fd < 0) {
    throw Error(head + "cannot create files in the folder '" + dir.string() + "' (" + errno_text() +
                ")");
  }
  close(fd);
  unlink(tmp.c_str());
}

void write_replacing(const std::string& what, const std::string& path,
                     const std::function<void(std::ostream&)>& body) {
  const std::string head = what + " " + path + ": ";
  std::string tmp;
  const int fd = make_temp_beside(path, tmp);
  if (fd < 0) throw Error(head + "cannot create a file in its folder (" + errno_text() + ")");
  // mkstemp makes the file 0600; give it the old file's mode, or what a new file would get.
  struct stat old {};
  mode_t mode = 0;
  if (stat(path.c_str(), &old) == 0) {
    mode = old.st_mode & 07777;
  } else {
    const mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  const bool moded = fchmod(fd, mode) == 0;
  close(fd);
  try {
    if (!moded) throw Error(head + "cannot set the file mode (" + errno_text() + ")");
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(head + "cannot open a temporary file beside it for writing");
    body(f);
    f.close();
    if (!f) throw Error(head + "write failed");
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw Error(head + "cannot rename the temporary file into place (" + errno_text() + ")");
    }
  } catch (...) {
    unlink(tmp.c_str());
    throw;
  }
}

void write_replacing(const std::string& what, const std::string& path, const std::string& text) {
  write_replacing(what, path, [&](std::ostream& out) { out << text; });
}

void append_text(const std::string& what, const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) throw Error(what + " " + path + ": cannot open to append (" + errno_text() + ")");
  const ssize_t n = write(fd, text.data(), text.size());
  const int write_errno = errno;
  const bool closed = close(fd) == 0;
  if (n != static_cast<ssize_t>(text.size()) || !closed) {
    errno = write_errno;
    throw Error(what + " " + path + ": append failed (" + errno_text() + ")");
  }
}

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace cgemm::launcher
