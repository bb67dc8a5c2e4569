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
//   ready[q]: 1 while TP rank q is ready to receive this rank's next push and this rank has not
//             yet taken that in, and
//   data[p]:  1 while TP rank p's last push into this rank is complete and not yet taken in.
// A flag is set (to 1) only by the peer it belongs to, with cuStreamWriteValue64 on the peer's
// mapping of this array, and cleared (to 0) only by its owner, right after its wait for 1 saw it
// (cuStreamWaitValue64, then a local cuStreamWriteValue64 of 0).
//
// Why flags that go back to 0 and not a counter: the values an exchange writes and waits for are
// the same constants in every exchange, so a CUDA graph that captured exchanges replays them
// correctly any number of times, mixed with eager calls in any order (a counter numbered on the
// host would be baked into the captured waits, and a replay would wait for numbers long passed).
// Every completed exchange leaves the flags it used at 0.
//
// Protocol. Every rank starts the same exchange groups in the same order, and in each group the
// pairs match (this rank sends to q iff q receives from this rank). A group is a sequence of
// operations on the communication stream, which runs the groups in order, one after another
// (the backend orders a replayed CUDA graph's exchanges with its eager ones the same way):
//   1. for each recv peer p:  set p's ready[me]                        "my slots are free"
//   2. for each send peer q:  wait until my ready[q] is 1, clear it    "q's slots are free"
//   3. for each send:         cudaMemcpyAsync into q's copy of the buffer at send_offset (push)
//   4. for each send peer q:  set q's data[me]                         "your data is there"
//   5. for each recv peer p:  wait until my data[p] is 1, clear it     "my data is here"
//   then an event, which wait_exchange() makes compute streams wait for.
//
// Why it is right:
//  - Data before flag: step 4 comes after the copy in stream order, and a stream memory write
//    without CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is preceded by a memory fence with the
//    semantics of __threadfence_system(), so the pushed bytes are visible in the peer's memory
//    before its data flag changes. Where the device reports CAN_FLUSH_REMOTE_WRITES, step 5
//    also uses CU_STREAM_WAIT_VALUE_FLUSH so that the receiving GPU's downstream work sees them.
//  - A set never lands on a flag still 1 (which would lose it): p sets q's ready[p] for a group
//    only after its step 5 of the last group in which it received from q, which waited for q's
//    push of that group, which q made after its step 2 of that group cleared the flag; q's
//    clear is fenced before that push's data flag. Likewise q sets p's data[q] only after
//    seeing p's ready for the group (step 2), which p set (step 1) after its step-5 clear of
//    the group before.
//  - Buffer reuse: a rank writes into a peer's slots only after that peer announced the group
//    (step 2), and a peer announces it only when its communication stream reaches the group:
//    after its previous groups completed and after the work its start_exchange made the group
//    wait for. That is exactly when NCCL's ncclRecv would start writing the same slots, so the
//    schedule's reuse rules are the same for both transports: a slot may be overwritten from
//    the start of the receiver's next group that names it.
//  - FIFO: step 5 completes a group's receives before the next group starts on the same stream,
//    so a ring step may forward the chunk the previous step received.
//  - No deadlock: every rank writes all its ready flags (step 1) before any of its waits, and
//    the data flags a rank waits for in step 5 depend only on step 1 of the same group on this
//    rank.
//  - Teardown: every write into a rank's memory (data pushes and flag writes) is one that rank
//    waits for in its own steps 2 and 5, so once a rank's work is done (the device idle, the
//    graphs' replays included) no peer writes into its buffers or flags any more, and it can
//    close and free them without a barrier.
//  - A group issued only in part (an error between its steps 1 and 5) leaves flags at 1, which
//    the next group would take for its own (a counter's stale value was harmless; a stale 1 is
//    not): after a call that failed mid-issue the context must not run exchanges again (the
//    programs end the job on any error; a library caller destroys the context).
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
  /// Capturable: every exchange writes and waits for the same constants (see Flags above).
  std::string capture_refusal() const override { return ""; }
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
  uint64_t seq_ = 0;                   // groups started, for error messages only
  uint64_t* flags_ = nullptr;          // this rank's flags, 2 * size_ entries
  std::vector<uint64_t*> peer_flags_;  // peer_flags_[r]: rank r's flags mapped here
  // peers_[id][r]: TP rank r's copy of symmetric buffer `id` mapped here (local for r = me).
  std::map<int, std::vector<void*>> peers_;
};

}  // namespace cgemm
