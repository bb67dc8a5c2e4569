#include "output_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <streambuf>

#include "option_error.hpp"
#include "output_target.hpp"
#include "temp_files.hpp"

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

bool char_device(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

fs::path folder_of(const std::string& path) {
  const fs::path dir = fs::path(path).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

std::string errno_text(int e = errno) { return std::strerror(e); }

// Writes all of [data, data + size) to `fd`; false (errno set) when a write fails. A short
// write (a full disk takes what fits) is followed by another, which says why.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// An ostream's buffer over a file descriptor that keeps the errno of the first failed write,
// so the error names the reason ("No space left on device").
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) { setp(buf_, buf_ + sizeof(buf_)); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (!flush_buffer()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return flush_buffer() ? 0 : -1; }

 private:
  bool flush_buffer() {
    if (error_ != 0) return false;
    const size_t n = static_cast<size_t>(pptr() - pbase());
    if (n > 0 && !write_all(fd_, pbase(), n)) error_ = errno;
    setp(buf_, buf_ + sizeof(buf_));
    return error_ == 0;
  }
  int fd_;
  int error_ = 0;
  char buf_[1 << 16];
};

// Runs `body` on a stream over `fd` and flushes it; throws naming the failed write's reason.
void write_through(const std::string& head, int fd,
                   const std::function<void(std::ostream&)>& body) {
  FdBuf buf(fd);
  std::ostream out(&buf);
  body(out);
  out.flush();
  if (buf.error() != 0) throw Error(head + "write failed (" + errno_text(buf.error()) + ")");
  if (!out) throw Error(head + "write failed");
}

// A character device is written where it is: opened without O_CREAT or O_TRUNC, which could
// not replace it anyway, and without blocking in case something else stands there by now.
void write_in_place(const std::string& head, const std::string& path,
                    const std::function<void(std::ostream&)>& body) {
  const int fd = open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(head + "cannot open the device for writing (" + errno_text() + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode) ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    close(fd);
    throw Error(head + "is no longer a character device");
  }
  try {
    write_through(head, fd, body);
  } catch (...) {
    close(fd);
    throw;
  }
  if (close(fd) != 0) throw Error(head + "write failed (" + errno_text() + ")");
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
      // A character device is written in place, each output in turn: two outputs may share
      // one (--report /dev/null --trace /dev/null) as two shells' redirections may.
      if (!other.path.empty() && same_file(out.path, other.path) &&
          !(char_device(out.path) && char_device(other.path))) {
        throw OptionError(out.option + " " + out.path + " names the same file as " + other.option +
                          " " + other.path + ": give each output its own file");
      }
    }
  }
}

void check_writable(const NamedPath& out) {
  const std::string head = out.option + " " + out.path + ": ";
  const OutputTarget target = output_target(out.option, out.path);
  const bool exists = target.kind != OutputTarget::kNew;
  if (exists && access(target.path.c_str(), W_OK) != 0) {
    throw Error(head + "the file is not writable (" + errno_text() + ")");
  }
  if (target.kind == OutputTarget::kDevice) return;
  std::error_code ec;
  const fs::path dir = folder_of(target.path);
  if (!fs::is_directory(dir, ec)) {
    throw Error(head + "cannot write there: no such folder '" + dir.string() + "'");
  }
  if (out.appended && exists) return;
  // Replaced files are written beside the target and renamed: the folder must take a file.
  std::string tmp;
  const int fd = make_temp_beside(target.path, tmp);
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
  const OutputTarget target = output_target(what, path);
  if (target.kind == OutputTarget::kDevice) return write_in_place(head, path, body);
  remove_stale_temps(target.path);
  std::string tmp;
  const int fd = make_temp_beside(target.path, tmp);
  if (fd < 0) throw Error(head + "cannot create a file in its folder (" + errno_text() + ")");
  bool fd_open = true;
  try {
    // mkstemp makes the file 0600; give it the old file's mode, or what a new file would get.
    struct stat old {};
    mode_t mode = 0;
    if (target.kind == OutputTarget::kFile && stat(target.path.c_str(), &old) == 0) {
      mode = old.st_mode & 07777;
    } else {
      const mode_t mask = umask(0);
      umask(mask);
      mode = 0666 & ~mask;
    }
    if (fchmod(fd, mode) != 0)
      throw Error(head + "cannot set the file mode (" + errno_text() + ")");
    write_through(head, fd, body);
    fd_open = false;
    if (close(fd) != 0) throw Error(head + "write failed (" + errno_text() + ")");
  } catch (...) {
    if (fd_open) close(fd);
    unlink(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), target.path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    throw Error(head + "cannot rename the temporary file into place (" + errno_text(e) + ")");
  }
}

void write_replacing(const std::string& what, const std::string& path, const std::string& text) {
  write_replacing(what, path, [&](std::ostream& out) { out << text; });
}

void append_text(const std::string& what, const std::string& path, const std::string& text) {
  const std::string head = what + " " + path + ": ";
  // O_NONBLOCK: a FIFO put here since the check fails at once instead of waiting for a reader.
  const int fd =
      open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd < 0) throw Error(head + "cannot open to append (" + errno_text() + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)) ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    close(fd);
    throw Error(head + "is no longer a regular file or a character device");
  }
  // One write(2) holds the whole text; if the disk takes only part of it, the file is cut
  // back to where it ended, so a row is there whole or not at all.
  const off_t before = S_ISREG(st.st_mode) ? lseek(fd, 0, SEEK_END) : -1;
  if (!write_all(fd, text.data(), text.size())) {
    const int write_errno = errno;
    const bool cut = before < 0 || ftruncate(fd, before) == 0;
    close(fd);
    throw Error(head + "append failed (" + errno_text(write_errno) + ")" +
                (cut ? "" : "; the file may end in a partial row"));
  }
  if (close(fd) != 0) throw Error(head + "append failed (" + errno_text() + ")");
}

std::string file_notes() {
  return "Files: an output replaced by a run is written beside its file and renamed into place\n"
         "(a symlink is followed: the file it names is replaced); a character device such as\n"
         "/dev/null is written in place; a FIFO, socket or block device is refused. Files read\n"
         "(--config and other FILE inputs) must be regular files.\n";
}

std::string first_line(const std::string& path) {
  // Only a regular file has a header to read: a terminal or a FIFO would wait for input.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace cgemm::launcher
