#include "temp_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace cgemm::launcher {

namespace fs = std::filesystem;

namespace {

fs::path folder_of(const std::string& file) {
  const fs::path dir = fs::path(file).parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

// ".NAME.cgemm-tmp." : every temporary file of `file` starts so.
std::string temp_prefix(const std::string& file) {
  return "." + fs::path(file).filename().string() + ".cgemm-tmp.";
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "host";
  return name;
}

bool process_gone(pid_t pid) { return pid == getpid() || (kill(pid, 0) != 0 && errno == ESRCH); }

// Whether `rest` ("HOST.PID.XXXXXX", what follows the prefix) names a temporary file of a
// process of this host that no longer runs.
bool stale(const std::string& rest, const std::string& host) {
  const size_t x = rest.rfind('.');
  if (x == std::string::npos || x == 0) return false;
  const size_t p = rest.rfind('.', x - 1);
  if (p == std::string::npos || rest.compare(0, p, host) != 0 || p != host.size()) return false;
  pid_t pid = 0;
  const char* first = rest.data() + p + 1;
  const char* last = rest.data() + x;
  const auto [end, ec] = std::from_chars(first, last, pid);
  return ec == std::errc() && end == last && pid > 0 && process_gone(pid);
}

}  // namespace

int make_temp_beside(const std::string& file, std::string& tmp) {
  tmp = (folder_of(file) /
         (temp_prefix(file) + host_name() + "." + std::to_string(getpid()) + ".XXXXXX"))
            .string();
  return mkstemp(tmp.data());
}

void remove_stale_temps(const std::string& file) {
  const std::string prefix = temp_prefix(file), host = host_name();
  std::error_code ec;
  for (fs::directory_iterator it(folder_of(file), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || it->symlink_status(ec).type() != fs::file_type::regular) {
      continue;
    }
    std::error_code gone;
    if (stale(name.substr(prefix.size()), host)) fs::remove(it->path(), gone);
  }
}

}  // namespace cgemm::launcher
