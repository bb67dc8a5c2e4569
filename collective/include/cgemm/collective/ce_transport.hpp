#pragma once
// Copy-engine transport inside one node: CUDA IPC and stream memory operations, no SMs.
// Only built with CUDA. Used when every rank of the TP group is on this node and use_ce is set;
// create() says on every rank alike when it cannot be used, and the caller falls back to NCCL.
//
// Memory. Each symmetric buffer is a cudaMalloc allocation on every TP rank; attach()
// exchanges the cudaIpcMemHandles with MPI_Allgather on the TP communicator and opens every
// peer's copy (cudaIpcMemLazyEnablePeerAccess turns on peer access), so a rank can write into
// a peer's copy with a plain cudaMemcpyAsync, which the copy engines run.
//
// Flags. Each rank also owns a small IPC-shared array of 64-bit flags, two per TP rank:
//   ready[q]: the last exchange in which TP rank q is ready to receive from this rank, and
//   data[p]:  the last exchange whose data TP rank p has finished writing into this rank.
// Flags are only ever written by the peer they belong to (with cuStreamWriteValue64 on the
// peer's mapping of this array) and only waited on by their owner (cuStreamWaitValue64, GEQ),
// so no flag has two writers and values only grow.
//
// Protocol. Exchange groups are numbered 1, 2, 3, ... in the order they are started; every rank
// starts the same groups in the same order, so a number names the same group everywhere. Group
// s is a sequence of operations on the communication stream, which runs the groups in order:
//   1. for each recv peer p:  write s to p's ready[me]      "my slots for group s are free"
//   2. for each send peer q:  wait until my ready[q] >= s   "q's slots for group s are free"
//   3. for each send:         cudaMemcpyAsync into q's copy of the buffer at send_offset (push)
//   4. for each send peer q:  write s to q's data[me]        "your data of group s is there"
//   5. for each recv peer p:  wait until my data[p] >= s     "my data of group s is here"
//   then an event, which wait_exchange() makes compute streams wait for.
//
// Why it is right:
//  - Data before flag: step 4 comes after the copy in stream order, and a stream memory write
//    without CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is preceded by a memory fence with the
//    semantics of __threadfence_system(), so the pushed bytes are visible in the peer's memory
//    before its data flag changes. Where the device reports CAN_FLUSH_REMOTE_WRITES, step 5
//    also uses CU_STREAM_WAIT_VALUE_FLUSH so that the receiving GPU's downstream work sees them.
//  - Buffer reuse: a rank writes into a peer's slots only after that peer announced group s
//    (step 2), and a peer announces group s only when its communication stream reaches group s:
//    after its previous groups completed and after the work its start_exchange made the group
//    wait for. That is exactly when NCCL's ncclRecv would start writing the same slots, so the
//    schedule's reuse rules are the same for both transports: a slot may be overwritten from
//    the start of the receiver's next group that names it.
//  - FIFO: step 5 completes group s's receives before group s+1 starts on the same stream, so a
//    ring step may forward the chunk the previous step received.
//  - No deadlock: every rank writes all its ready flags (step 1) before any of its waits, and
//    the data flags a rank waits for in step 5 depend only on step 1 of the same group on this
//    rank. A wait satisfied with a larger value is harmless: a peer cannot reach group s+1
//    before it finished group s (its own step 5 waits for this rank's push of group s).
//  - Teardown: every write into a rank's memory (data pushes and flag writes) is one that rank
//    waits for in its own steps 2 and 5, so once a rank's streams are idle no peer writes into
//    its buffers or flags any more, and it can close and free them without a barrier.
//
// Limits: the communication stream blocks in steps 2 and 5; compute streams never do. Pushes of
// one group run one after another on the communication stream (one copy engine queue).

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cgemm/collective/transport.hpp"

namespace cgemm {

class CeTransport final : public Transport {
 public:
  /// Collective over `tp_comm` with the device that is current. Every rank gets the same
  /// answer: a transport, or nullptr and `why_not` (naming the rank and the reason) when some
  /// rank cannot use stream memory operations or CUDA IPC with its peers. Create it only when
  /// every rank of `tp_comm` is on this node: it then reaches every peer of the group.
  static std::unique_ptr<CeTransport> create(MPI_Comm tp_comm, std::string where,
                                             std::string& why_not);
  ~CeTransport() override;
  CeTransport(const CeTransport&) = delete;
  CeTransport& operator=(const CeTransport&) = delete;

  std::string name() const override { return "copy-engine (CUDA IPC)"; }
  std::string capture_refusal() const override {
    return "the copy-engine transport numbers its exchanges on the host and bakes the numbers "
           "into its stream waits, so a replay would wait for numbers already passed";
  }
  /// One line: copy engines, flush support.
  std::string describe() const override;
  bool can_connect(int peer) const override { return peer >= 0 && peer < size_ && peer != rank_; }
  /// Collective: `buf.local` must be the start of a cudaMalloc allocation of at least
  /// `buf.bytes`. Exchanges the IPC handles (MPI_Allgather) and opens every peer's copy.
  void attach(const SymmetricBuffer& buf) override;
  /// Closes the peers' copies (local only).
  void detach(const SymmetricBuffer& buf) noexcept override;
  /// Enqueues the group on `stream` (the communication stream; the same stream for every
  /// group), following the protocol above. Returns -1: completion is in stream order.
  int64_t start(std::span<const Exchange> group, void* stream) override;
  void wait(int64_t) override {}

 private:
  CeTransport() = default;
  void release_flags() noexcept;
  uint64_t* ready_slot(uint64_t* flags, int rank) const { return flags + rank; }
  uint64_t* data_slot(uint64_t* flags, int rank) const { return flags + size_ + rank; }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string where_;
  int rank_ = 0, size_ = 1;
  bool flush_ = false;
  uint64_t seq_ = 0;
  uint64_t* flags_ = nullptr;          // this rank's flags, 2 * size_ entries
  std::vector<uint64_t*> peer_flags_;  // peer_flags_[r]: rank r's flags mapped here
  // peers_[id][r]: TP rank r's copy of symmetric buffer `id` mapped here (local for r = me).
  std::map<int, std::vector<void*>> peers_;
};

}  // namespace cgemm
