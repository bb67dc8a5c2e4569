#pragma once
// nccl-tests' figures for a collective (its doc/PERFORMANCE.md), so cgemm-bench's GB/s compare
// with nccl-tests' and with the links' peak:
//   bytes = S, the whole array: tp shards. For the all-gather, the bytes gathered (each rank's
//           input x tp); for the reduce-scatter, the input of one rank (its output x tp).
//   algbw = S / time
//   busbw = algbw x (tp - 1) / tp for both (an all-reduce's factor would be 2 (tp - 1) / tp;
//           cgemm has none): what a ring moves per rank over the time.
// GB/s are 1e9 bytes per second.

#include <cstdint>

#include "cgemm/core/collective_op.hpp"

namespace cgemm::launcher {

/// nccl-tests' S for one rank's `shard_bytes` (the all-gather's input, the reduce-scatter's
/// output) over tp ranks. Throws cgemm::Error for CollectiveOp::kNone.
int64_t collective_bytes(CollectiveOp op, int64_t shard_bytes, int tp);
/// The bytes each rank sends (and receives) in a ring: S x (tp - 1) / tp.
int64_t ring_bytes_per_rank(CollectiveOp op, int64_t bytes, int tp);
/// busbw / algbw: (tp - 1) / tp for the all-gather and the reduce-scatter.
double bus_factor(CollectiveOp op, int tp);
/// bytes / time [GB/s]; 0 for a time that is not positive.
double algbw_gb_s(int64_t bytes, double ms);
double busbw_gb_s(CollectiveOp op, int tp, int64_t bytes, double ms);

}  // namespace cgemm::launcher
