#pragma once
// The memory check before any allocation: the bytes the ranks sharing one memory need
// (plan_description.hpp's PlanBytes, summed by the caller) against what that memory has.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/runtime/options.hpp"

namespace cgemm {

struct MemoryCheck {
  bool ok = true;
  int64_t need = 0;       // bytes the sharing ranks need together
  int64_t available = 0;  // bytes the memory has; -1: unknown (then ok)
  std::string memory;     // the binding limit (HostMemoryLimit::name) or "free memory of GPU <d>"
  std::string message;    // why not ok, naming the need, the sharing ranks and the memory
};

/// MemAvailable of /proc/meminfo in bytes; -1 where it cannot be read.
int64_t host_available_bytes();

/// One limit on the host memory this rank may take, in bytes still free under it.
struct HostMemoryLimit {
  int64_t available = 0;
  std::string name;       // e.g. "host memory (MemAvailable)", said in the check's message
  bool per_rank = false;  // a limit of this process (RLIMIT_AS), not of the sharing ranks
};

/// The limits that apply here: MemAvailable; the cgroup's limit less its usage (v2
/// memory.max - memory.current, v1 memory.limit_in_bytes - memory.usage_in_bytes; a cgroup
/// without a limit adds nothing); RLIMIT_AS less this process's mapped address space (VmSize).
std::vector<HostMemoryLimit> host_memory_limits();

/// Compares `need_together` (bytes, the sum over the `sharing_ranks` ranks of one host (CPU
/// backend) or one GPU (CUDA backend), this rank included) with the room left (kCpu: every
/// host_memory_limits(), the per-rank one against `need_each`, this rank's bytes (< 0: an equal
/// share of need_together); the limit with the least room binds and the message names it) or
/// the current CUDA device's free memory (kCuda: cudaMemGetInfo, after the backend's own
/// allocations; without CUDA the check passes as unknown). No MPI: the caller sums the needs
/// and agrees on the verdict.
MemoryCheck check_memory(BackendKind backend, int64_t need_together, int sharing_ranks,
                         int64_t need_each = -1);

}  // namespace cgemm
