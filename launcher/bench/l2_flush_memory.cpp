#include "l2_flush_memory.hpp"

#include <cstdint>
#include <sstream>

#include "cgemm/runtime/memory_check.hpp"

namespace cgemm::launcher {

double l2_flush_bytes(double l2_mib) { return 2.0 * l2_mib * 1048576.0; }

std::string l2_memory_refusal(double l2_mib, const Context& ctx) {
  const BackendKind backend = ctx.backend().kind();
  const int sharing = ctx.ranks_sharing_memory();
  // At most 2 x 4096 MiB per rank (kMaxL2Mib) times the ranks of one host: far below int64.
  const auto together = static_cast<int64_t>(l2_flush_bytes(l2_mib) * sharing);
  const MemoryCheck c = check_memory(backend, together, sharing);
  if (c.ok) return {};
  std::ostringstream s;
  s << "--l2_mib " << l2_mib << ": each rank rotates its inputs over copies of more than "
    << 2 * l2_mib << " MiB (twice the L2 size) to flush L2: " << c.message
    << " (nothing was allocated; a smaller --l2_mib flushes less)";
  return s.str();
}

}  // namespace cgemm::launcher
