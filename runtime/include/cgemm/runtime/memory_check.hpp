#pragma once
// The memory check before any allocation: the bytes the ranks sharing one memory need
// (plan_description.hpp's PlanBytes, summed by the caller) against what that memory has.

#include <cstdint>
#include <string>

#include "cgemm/runtime/options.hpp"

namespace cgemm {

struct MemoryCheck {
  bool ok = true;
  int64_t need = 0;       // bytes the sharing ranks need together
  int64_t available = 0;  // bytes the memory has; -1: unknown (then ok)
  std::string memory;     // "host memory (MemAvailable)" or "free memory of GPU <device>"
  std::string message;    // why not ok, naming the need, the sharing ranks and the memory
};

/// MemAvailable of /proc/meminfo in bytes; -1 where it cannot be read.
int64_t host_available_bytes();

/// Compares `need_together` (bytes, the sum over the `sharing_ranks` ranks of one host (CPU
/// backend) or one GPU (CUDA backend), this rank included) with the host's MemAvailable
/// (kCpu) or the current CUDA device's free memory (kCuda: cudaMemGetInfo, after the
/// backend's own allocations; without CUDA the check passes as unknown). No MPI: the caller
/// sums the needs and agrees on the verdict.
MemoryCheck check_memory(BackendKind backend, int64_t need_together, int sharing_ranks);

}  // namespace cgemm
