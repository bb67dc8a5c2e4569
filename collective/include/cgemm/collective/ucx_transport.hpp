#pragma once
// UCX one-sided transport of the ring, for host memory: UCP puts into the peers' copies of the
// symmetric buffers. The CPU backend uses it directly; the CUDA backend through
// ucx_staged_transport.hpp, which stages device buffers through pinned host copies. Only built
// where UCX was found (CGEMM_HAVE_UCX). Chosen with `transport = ucx`
// (BackendOptions::transport); `auto` keeps MPI, as UCX has not measured faster
// (docs/PERFORMANCE.md).
//
// Setup (create, collective over the TP communicator). One UCP context (feature RMA) and one
// worker per rank, single-threaded: only the thread that runs the backend drives it. The
// workers' addresses are exchanged with MPI_Allgatherv on the TP communicator and every rank
// makes an endpoint to every peer. A peer is reachable (can_connect) when the endpoints of both
// sides were made; every rank learns every rank's answer, so both sides of a pair agree.
//
// Memory. Each symmetric buffer is registered once, when it is attached (the engine allocates
// its ring once per plan), with ucp_mem_map; its address and packed remote key go to every TP
// rank (MPI_Allgather/Allgatherv), which unpacks one remote key per peer. detach() destroys
// them and unmaps the buffer. Each rank also registers, at setup, a small array of 64-bit
// flags, two per TP rank:
//   ready[q]: the last exchange group in which TP rank q is ready to receive from this rank;
//   data[p]:  the last exchange group whose data TP rank p has finished putting into this rank.
// A flag is written only by the peer it belongs to and read only by its owner, and its values
// only grow. A flag put (8 bytes, 8-byte aligned at both ends) is assumed to land as one store
// with the transports used (shared memory, TCP, RDMA on host memory): UCP does not promise
// that a put is single-copy atomic, and a torn write would let the owner read a wrong group.
//
// Protocol: that of the copy-engine transport (ce_transport.hpp), with the host as the engine.
// Groups are numbered 1, 2, ... in the order they are started (the same on every rank).
// Group s:
//   1. start():   for each recv peer p, put s into p's ready[me]      "my slots are free"
//   2. progress:  for each send peer q whose ready[q] >= s, in group order: put every chunk
//                 for q into q's copy of its buffer, order (below), put s into q's data[me]
//   3. complete:  every put of the group completed locally, and data[p] >= s for each recv
//                 peer p                                                "my data is here"
// The order step puts the data before the flag, so a peer that sees the flag sees the data.
// From UCX 1.14 it is ucp_worker_fence, a strong fence there (it orders across all lanes of an
// endpoint: openucx/ucx PR 8596). Before 1.14 the fence orders only within a lane, and with
// multi-rail RMA the flag could overtake the data; there the order step is ucp_ep_flush_nbx to
// q, and the flag is put only once that flush completed (a later progress() call: nothing
// blocks on it). The choice is made from ucp_get_version() at create(); describe() and
// cgemm-ucx-info say which one runs. A rank writes a peer's slots only
// after the peer announced the group, i.e. from the start of the peer's group that names them,
// which is exactly when MPI's receive would write them: the schedules' reuse rules hold for
// both. Every write into a rank's memory is one that rank waits for, so once its waits return
// no peer writes into its buffers and detach() needs no barrier.
//
// Progress: ucp_worker_progress runs inside progress() (between GEMM chunks) and inside wait(),
// which spins on it and yields the CPU (sched_yield) after 64 empty calls in a row, so that with
// more ranks than cores the peer it waits for gets to run. Every wait (wait(), attach's exchange,
// the endpoint close at the end) runs under a watchdog scope naming the step, the exchange group
// and the peer by world rank and host, so a stalled peer is named within the job's timeout.
//
// Why puts and not tagged send/receive: the issue asks for the one-sided design of the field
// (NVSHMEM, cuBLASMp); a put needs no matching receive, so a chunk moves as soon as the peer
// has announced the group, without a rendezvous per message. Tagged messages were not measured.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cgemm/collective/transport.hpp"

// UCP's handle types, declared here so that this header needs no UCX header.
struct ucp_context;
struct ucp_worker;
struct ucp_ep;
struct ucp_rkey;
struct ucp_mem;

namespace cgemm {

/// What query_context() found: `ok` false when no UCP context could be made (`text` says why).
struct UcxContextInfo {
  bool ok = false;
  bool cuda_memory = false;  // the context reports UCS_MEMORY_TYPE_CUDA
  std::string text;          // lines for a person
};

class MeshComms;

/// Empty when `t` reaches every peer of this rank's TP group in `comms` (Transport::
/// can_connect), else "<this rank> cannot reach <peer> over UCX (<detail>)" for the first peer
/// it does not; `detail` is UcxTransport::create's word on it (its why_not on success), may be
/// empty. For the backends' `transport = ucx`, which turn it into one message on every rank.
std::string ucx_reach_problem(const Transport& t, const MeshComms& comms,
                              const std::string& detail);

/// See UcxTransport::device_path().
enum class UcxDevicePath { kDirect, kStaged };

class UcxTransport final : public Transport {
 public:
  /// Collective over `tp_comm`. Every rank gets the same answer: a transport, or nullptr and
  /// `why_not` (naming each rank that failed and UCX's reason, e.g. no usable transport with
  /// UCX_TLS=bogus). `where` prefixes errors and watchdog lines (e.g. "cpu backend, tp rank
  /// 0"); `describe_peer(tp_rank)` names a peer in them ("world rank R (host H)").
  /// `serialized`: the caller will drive it from more than one thread, never two at once
  /// (UCS_THREAD_MODE_SERIALIZED; the staged transport's proxy thread); else one thread only.
  static std::unique_ptr<UcxTransport> create(MPI_Comm tp_comm, std::string where,
                                              std::function<std::string(int)> describe_peer,
                                              std::string& why_not, bool serialized = false);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  std::string name() const override { return "ucx"; }
  std::string capture_refusal() const override {
    return "the UCX transport moves host memory through UCP calls of this host: nothing of it "
           "runs on a CUDA stream";
  }
  /// One line: puts, the flag's ordering (fence or flush, by UCX version), and UCX's version.
  std::string describe() const override;
  /// Whether both this rank and `peer` made an endpoint to each other (the same on both sides).
  bool can_connect(int peer) const override;
  /// Collective: registers `buf` (ucp_mem_map), exchanges its address and remote key over the
  /// TP communicator and unpacks the peers'. Throws on every rank alike when a rank cannot
  /// (registration failed, a null buffer, sizes that differ).
  void attach(const SymmetricBuffer& buf) override;
  /// Local: destroys the peers' remote keys and unmaps `buf`.
  void detach(const SymmetricBuffer& buf) noexcept override;
  /// Starts group s (step 1 of the protocol, and step 2 for peers that are ready); `stream`
  /// unused. Every destination must be attached.
  int64_t start(std::span<const Exchange> group, void* stream) override;
  /// Drives the worker until group `handle` (and every group started before it) is complete.
  void wait(int64_t handle) override;
  /// One ucp_worker_progress and the protocol steps it makes possible.
  void progress() override;
  /// wait() without blocking: progress(), then true when group `handle` (and so every group
  /// started before it) is complete, which also forgets it as wait() does. Throws for a handle
  /// that is unknown or already forgotten.
  bool test(int64_t handle);
  /// What group `handle` (or a group before it) waits for, for a watchdog line: "exchange
  /// '<labels>' over UCX (group s): data from <peer>", a peer's ready flag, or the local
  /// completion of its puts.
  std::string waiting_for(int64_t handle) const;

  /// What UCX offers in this process, for tools (cgemm-ucx-info): the library's version, the
  /// memory types of a context with RMA (ucp_context_query: "host, cuda, ..."), the device
  /// path (device_path) and, with `with_transports`, the transports and devices UCP selected
  /// (ucp_context_print_info). Local; needs no MPI.
  static UcxContextInfo query_context(bool with_transports);
  /// How device (CUDA) buffers could reach UCX: direct where a UCP context reports CUDA
  /// memory, else staged through pinned host memory. The CUDA backend's UCX transport
  /// (ucx_staged_transport.hpp) always stages, as staging works with every UCX build; kDirect
  /// says where passing device pointers would be the later optimization.
  static UcxDevicePath device_path();

 private:
  UcxTransport() = default;
  struct Region {
    ucp_mem* mem = nullptr;
    std::vector<uint64_t> addr;    // by TP rank: the base address of its copy
    std::vector<ucp_rkey*> rkeys;  // by TP rank; null at this rank
    size_t bytes = 0;
  };
  struct Put {
    void* request = nullptr;  // UCP request, null once complete
  };
  struct Pending {
    int64_t handle = 0;
    uint64_t seq = 0;
    std::vector<Exchange> sends;  // copies; dst read through regions_ by id
    std::vector<int> dst_ids;
    std::vector<int> send_peers, recv_peers;
    std::vector<bool> pushed;     // by send_peers index: data and flag issued
    std::vector<void*> flushing;  // by send_peers index: the flush before the flag (UCX < 1.14)
    std::vector<void*> requests;
    std::unique_ptr<uint64_t> value;  // the source of this group's flag puts: seq
    std::string labels;
    bool done = false;  // complete (in group order); erased by its wait()
  };

  std::string problem_of_registration(const SymmetricBuffer& buf, Region& r);
  void exchange_keys(Region& r, const void* packed, size_t packed_bytes, uint64_t base,
                     std::string& problem);
  void release_region(Region& r) noexcept;
  void put(Pending& p, const void* src, size_t bytes, int peer, uint64_t remote_addr,
           ucp_rkey* rkey, const char* what);
  // Pushes what became possible and marks, in group order, the groups that completed.
  void advance();
  bool complete(Pending& p);
  // The pending group `handle`; throws, naming `caller`, for one unknown or already completed.
  std::deque<Pending>::iterator find_pending(int64_t handle, const char* caller);
  uint64_t flag(size_t index) const;
  void set_blocker(std::string what);
  std::string peer_name(int peer) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::string where_;
  std::function<std::string(int)> describe_peer_;
  int rank_ = 0, size_ = 1;
  ucp_context* context_ = nullptr;
  ucp_worker* worker_ = nullptr;
  std::vector<ucp_ep*> eps_;   // by TP rank; null at this rank and where none could be made
  std::vector<char> reach_;    // by TP rank: both sides made their endpoints
  bool strong_fence_ = false;  // ucp_worker_fence orders across lanes (UCX >= 1.14)
  uint64_t* flags_ = nullptr;  // 2 * size_: ready[q] at q, data[p] at size_ + p
  Region flag_region_;
  std::map<int, Region> regions_;  // by SymmetricBuffer::id
  std::deque<Pending> pending_;
  uint64_t seq_ = 0;
  int64_t next_handle_ = 0;
  std::mutex blocker_mutex_;  // the watchdog's thread reads blocker_ on a timeout
  std::string blocker_;
};

}  // namespace cgemm
