#pragma once
// The bounds of a described dry run (--ranks_per_node, dry_run.hpp), apart from the dry run
// itself: the option checks (run_config.cpp) refuse past them without planning anything.

#include <cstdint>

namespace cgemm::launcher {

/// The most ranks a described dry run (--ranks_per_node) plans and prints: each is planned,
/// kept (about 100 KB) and printed on a line of its own, so a world of a million ranks would
/// print for minutes and hold about 100 GB before its first line.
inline constexpr int kMaxDescribedRanks = 8192;

/// The most rank x TP-peer pairs a described dry run plans (world x tp): each rank's plan
/// holds its transfers with each TP peer, so dp 1 x tp 8192, within the rank cap, needed
/// about 50 GB.
inline constexpr int64_t kMaxDescribedRankPeers = int64_t{1} << 18;

}  // namespace cgemm::launcher
