// The memory check (memory_check.hpp): for the host /proc/meminfo, the cgroup's limit and
// RLIMIT_AS, the smallest room counting; cudaMemGetInfo for a GPU.

#include "cgemm/runtime/memory_check.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <vector>

#ifdef CGEMM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cgemm {

namespace {

std::string gib(int64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30) << " GiB";
  return s.str();
}

std::string bytes_str(int64_t bytes) {
  return std::to_string(bytes) + " bytes (" + gib(bytes) + ")";
}

}  // namespace

namespace {

// The first number in `path`; -1 when it cannot be read or is not a number ("max").
int64_t read_number(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  if (!(in >> v)) return -1;
  return v;
}

// The value of `key` (e.g. "VmSize:") in a "key value kB" file, in bytes; -1 if absent.
int64_t read_kb(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;  // other lines need not hold numbers
    std::istringstream value(line.substr(key.size()));
    int64_t kb = -1;
    return value >> kb ? kb * 1024 : -1;
  }
  return -1;
}

// This process's cgroup folder of `controller` ("" for v2's unified hierarchy), from
// /proc/self/cgroup; "/" when not found.
std::string cgroup_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string list = line.substr(a + 1, b - a - 1);
    if (controller.empty() ? list.empty()
                           : ("," + list + ",").find("," + controller + ",") != std::string::npos) {
      return line.substr(b + 1);
    }
  }
  return "/";
}

// limit - usage of the first folder that has both files (the process's own cgroup, then the
// root as mounted in a container); -1 when none does or the limit is unset.
int64_t cgroup_room(const std::vector<std::string>& folders, const char* limit_file,
                    const char* usage_file) {
  constexpr int64_t kUnlimited = int64_t{1} << 60;  // v1 writes "no limit" as ~2^63
  for (const std::string& f : folders) {
    const int64_t limit = read_number(f + "/" + limit_file);
    const int64_t usage = read_number(f + "/" + usage_file);
    if (usage < 0) continue;
    if (limit < 0 || limit >= kUnlimited) return -1;
    return std::max<int64_t>(limit - usage, 0);
  }
  return -1;
}

}  // namespace

std::vector<HostMemoryLimit> host_memory_limits() {
  std::vector<HostMemoryLimit> limits;
  if (const int64_t v = host_available_bytes(); v >= 0) {
    limits.push_back({v, "host memory (MemAvailable)", false});
  }
  const std::string v2 = "/sys/fs/cgroup" + cgroup_path("");
  if (const int64_t v = cgroup_room({v2, "/sys/fs/cgroup"}, "memory.max", "memory.current");
      v >= 0) {
    limits.push_back({v, "the cgroup's memory (memory.max - memory.current)", false});
  }
  const std::string v1 = "/sys/fs/cgroup/memory" + cgroup_path("memory");
  if (const int64_t v = cgroup_room({v1, "/sys/fs/cgroup/memory"}, "memory.limit_in_bytes",
                                    "memory.usage_in_bytes");
      v >= 0) {
    limits.push_back(
        {v, "the cgroup's memory (memory.limit_in_bytes - memory.usage_in_bytes)", false});
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const int64_t used = std::max<int64_t>(read_kb("/proc/self/status", "VmSize:"), 0);
    const int64_t cap = static_cast<int64_t>(std::min<rlim_t>(as.rlim_cur, INT64_MAX));
    limits.push_back({std::max<int64_t>(cap - used, 0),
                      "this rank's address space (RLIMIT_AS, ulimit -v, less what it maps)", true});
  }
  return limits;
}

int64_t host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // kB
  }
  return -1;
}

MemoryCheck check_memory(BackendKind backend, int64_t need_together, int sharing_ranks,
                         int64_t need_each) {
  MemoryCheck c;
  c.need = need_together;
  if (need_each < 0) need_each = need_together / std::max(sharing_ranks, 1);
  if (backend == BackendKind::kCpu) {
    c.memory = "host memory (MemAvailable)";
    c.available = -1;
    // The limit that binds: the least room left after the need (a per-process limit against
    // this rank's need, the host's and the cgroup's against the sharing ranks' together).
    int64_t least_room = INT64_MAX;
    for (const HostMemoryLimit& l : host_memory_limits()) {
      const int64_t need = l.per_rank ? need_each : need_together;
      const int64_t room = l.available - need;  // both >= 0: no overflow
      if (room >= least_room) continue;
      least_room = room;
      c.available = l.available;
      c.memory = l.name;
      if (room < 0 && l.per_rank) {
        c.ok = false;
        c.message = "not enough memory: " + l.name + " leaves " + bytes_str(l.available) +
                    ", this rank needs " + bytes_str(need_each);
      } else if (room < 0) {
        c.ok = false;
        c.message = "not enough memory: " + std::to_string(sharing_ranks) + " rank(s) sharing " +
                    l.name + " need " + bytes_str(need_together) + " together, " +
                    bytes_str(l.available) + " available";
      }
    }
    return c;
  } else {
    c.available = -1;
    c.memory = "GPU free memory";
#ifdef CGEMM_HAVE_CUDA
    int device = -1;
    size_t free = 0, total = 0;
    if (cudaGetDevice(&device) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess) {
      c.available = static_cast<int64_t>(free);
      c.memory = "free memory of GPU " + std::to_string(device) + " (of " +
                 gib(static_cast<int64_t>(total)) + ")";
    }
#endif
  }
  if (c.available >= 0 && need_together > c.available) {
    c.ok = false;
    c.message = "not enough memory: " + std::to_string(sharing_ranks) + " rank(s) sharing " +
                c.memory + " need " + bytes_str(need_together) + " together, " +
                bytes_str(c.available) + " available";
  }
  return c;
}

}  // namespace cgemm
