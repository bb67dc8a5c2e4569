#pragma once
// cgemm-bench's L2 flush (--l2_mib): every rank rotates its inputs over copies that together
// exceed twice the L2 size, so a large --l2_mib is a large allocation; it is checked against
// the memory the ranks share before any copy is allocated.

#include <string>

#include "cgemm/runtime/context.hpp"

namespace cgemm::launcher {

/// The largest --l2_mib: above the L2 of any GPU by far, and its copies (twice this per rank)
/// stay a small part of one GPU's memory.
inline constexpr double kMaxL2Mib = 4096;

/// The bytes of input copies a rank holds for an L2 of `l2_mib` MiB: at least twice that.
double l2_flush_bytes(double l2_mib);

/// The memory check (cgemm/runtime/memory_check.hpp's check_memory) of the copies of all the
/// ranks sharing this rank's memory (its host on the CPU backend, its GPU on CUDA): "" when
/// they fit, else the refusal naming --l2_mib. No MPI: every rank's need is the same.
std::string l2_memory_refusal(double l2_mib, const Context& ctx);

}  // namespace cgemm::launcher
