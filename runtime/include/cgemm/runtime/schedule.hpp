#pragma once
// The overlap schedules, as plain data: which chunk each step computes and which chunks
// travel while it does. Written once; the collective GEMMs (runtime/src/kinds/) turn
// them into programs that the engine runs on every backend.
//
// ALL_GATHER: chunk c is rank c's lhs shard. Step 0 computes this rank's own chunk while
// it goes to the neighbour(s); step i computes the chunk(s) that arrived at step i-1 while
// forwarding them on. Plain: one ring (receive from the left, send to the right), tp steps.
// Aggregate: both directions at once, so each step computes up to two chunks and both
// directions of every link carry data; ceil((tp-1)/2) + 1 steps.
//
// REDUCE_SCATTER: step s computes the partial product destined for rank
// d = (me + 1 + s) mod tp and sends it there while step s+1 computes; the last step
// computes this rank's own partial. At step s this rank receives from (me - 1 - s) mod tp,
// the rank whose step s targets it. The partials are then summed in fp32 in rank order.

#include <vector>

namespace cgemm {

/// One chunk on the move: sent to send_peer (where it is stored as chunk send_chunk) and,
/// in the same pairwise exchange, chunk recv_chunk received from recv_peer.
struct ChunkTransfer {
  int send_peer = -1;
  int send_chunk = -1;
  int recv_peer = -1;
  int recv_chunk = -1;
};

struct AllGatherStep {
  std::vector<int> compute;              // chunks computed in this step (available now)
  std::vector<ChunkTransfer> transfers;  // started at this step, overlapping the compute
};

/// Steps of the all-gather ring for rank `me` of `tp`. Throws cgemm::Error for tp < 1 or
/// me outside [0, tp).
std::vector<AllGatherStep> all_gather_schedule(int tp, int me, bool aggregate);

struct ReduceScatterStep {
  int dest = -1;       // rank whose output rows this step's partial product belongs to
  int recv_from = -1;  // rank whose partial for this rank arrives during this step; -1 if none
};

std::vector<ReduceScatterStep> reduce_scatter_schedule(int tp, int me);

}  // namespace cgemm
