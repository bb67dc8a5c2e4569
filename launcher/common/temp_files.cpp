#include "temp_files.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
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

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "host";
  return name;
}

size_t name_max(const fs::path& folder) {
  const long n = pathconf(folder.c_str(), _PC_NAME_MAX);
  return n > 0 ? static_cast<size_t>(n) : 255;
}

// 64-bit FNV-1a, in hex: stable across runs and builds, unlike std::hash.
std::string name_hash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : name) h = (h ^ c) * 0x100000001b3ULL;
  char hex[17] = {};
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// ".NAME.cgemm-tmp." : every temporary file of `file` starts so. Where the whole temporary
// name (the prefix, then "HOST.PID.XXXXXX") would pass the folder's name limit, NAME is a
// hash of the output's name: a valid long output name could not be written. The choice
// depends only on the name, the host and the folder, so cleanup finds the same prefix.
std::string temp_prefix(const std::string& file, const std::string& host) {
  const std::string name = fs::path(file).filename().string();
  const std::string tail = ".cgemm-tmp.";
  constexpr size_t kPidAndSuffix = 1 + 10 + 7;  // ".PID" at most 10 digits, ".XXXXXX"
  if (1 + name.size() + tail.size() + host.size() + kPidAndSuffix <= name_max(folder_of(file))) {
    return "." + name + tail;
  }
  return "." + name_hash(name) + tail;
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
  const std::string host = host_name();
  tmp = (folder_of(file) /
         (temp_prefix(file, host) + host + "." + std::to_string(getpid()) + ".XXXXXX"))
            .string();
  return mkstemp(tmp.data());
}

void remove_stale_temps(const std::string& file) {
  const std::string host = host_name(), prefix = temp_prefix(file, host);
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
