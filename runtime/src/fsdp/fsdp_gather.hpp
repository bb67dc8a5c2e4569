#pragma once
// FSDP (ZeRO-3): a weight sharded over the fsdp group is gathered inside the GEMM that needs it.
// gemm.py's rule says which rhs dims are gathered (infer_gemm_sharding: a non-contracting rhs dim
// naming fsdp_resource becomes None, and so does a contracting one when the lhs's is not
// sharded); the caller passes its shard and the plan gathers it, over the fsdp group
// (cgemm/collective/group.hpp), into the fsdp ring (Workspace::kFsdpRing: one slot per fsdp
// rank, rank-major).
//
// It is a wrapper around any collective GEMM's programs, as quantization is: the kind's
// programs are written for the gathered rhs, and add_fsdp_gather rewrites every GEMM that
// reads the rhs. Two layouts:
//  - columns: the shards are blocks of the local GEMM's output columns (the rhs's outermost
//    non-contracting dim, [K, N/f] or [N/f, K] each). Each GEMM becomes one GEMM per shard,
//    writing that shard's columns of its output (and adding that shard's bias), in arrival
//    order: this rank's own shard first, from the caller's buffer, then each shard as it
//    arrives. So the gather hides under the GEMMs it feeds.
//  - rows: the shards are blocks of the contracting dim (the rhs's outermost contracting dim of
//    a [K, N] rhs, [K/f, N] each); the slots, rank-major, are then the gathered [K, N] rhs. Every
//    GEMM needs all of K, so it waits for the whole gather (no overlap inside the call: a GEMM
//    split over K would round its partial sums).
// The overlapped path moves the shards with exchanges (fsdp - 1 steps: at step s this rank
// sends its shard to fsdp rank me + s and receives rank me - s's), the sequential path with one
// all-gather before its GEMMs.

#include <cstddef>
#include <string>

#include "kinds/collective_gemm.hpp"

namespace cgemm {

struct FsdpGather {
  int size = 1;            // fsdp ranks (> 1)
  int me = 0;              // this rank's place in its fsdp group
  bool columns = true;     // shards of the output columns (N); false: of the contracting dim
  size_t shard_bytes = 0;  // the caller's rhs shard
};

/// Rewrites every program of `c` (made for the gathered rhs, g's geometry) to gather the rhs
/// first, as the top of this file says, and notes it in c's summary.
void add_fsdp_gather(CollectiveGemm& c, const FsdpGather& f, const GemmGeometry& g);

}  // namespace cgemm
