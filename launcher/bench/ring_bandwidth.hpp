#pragma once
// cgemm-bench --ring_bandwidth: the ring's transport alone (mpi or ucx, --transport), as the
// overlapped schedules use it: one ring step, every TP rank sending a message to TP rank + 1
// and receiving one from TP rank - 1 into a symmetric buffer (Backend::start_exchange, then
// wait_exchange), for messages of 1 KiB to 16 MiB (x4). Each sample is the slowest rank's time
// of one step from a synchronized start; the row keeps the median. GB/s (1e9 bytes) are the
// message bytes over that time: what one rank sent (and received) per second.

#include "cgemm/runtime/context.hpp"
#include "common/table.hpp"

namespace cgemm::launcher {

/// Collective over the job (every rank, tp >= 2). Prints one progress line per size.
Table ring_bandwidth(Context& ctx, int warmup, int iterations);

}  // namespace cgemm::launcher
