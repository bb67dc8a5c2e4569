// The memory check (memory_check.hpp): /proc/meminfo for the host, cudaMemGetInfo for a GPU.

#include "cgemm/runtime/memory_check.hpp"

#include <fstream>
#include <sstream>

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

MemoryCheck check_memory(BackendKind backend, int64_t need_together, int sharing_ranks) {
  MemoryCheck c;
  c.need = need_together;
  if (backend == BackendKind::kCpu) {
    c.memory = "host memory (MemAvailable)";
    c.available = host_available_bytes();
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
