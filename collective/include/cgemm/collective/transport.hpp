#pragma once
// The transport interface: how the bytes of an exchange (exchange.hpp) move between two ranks of
// a tensor-parallel group. One implementation per file, as NCCL's transports:
//   ce_transport.hpp    copy engines over CUDA IPC, inside a node (CUDA backend)
//   nccl_transport.hpp  NCCL send/recv, anywhere (CUDA backend)
//   mpi_transport.hpp   MPI point-to-point on host memory (CPU backend)
//   ucx_transport.hpp   UCX puts on host memory (CPU backend)
//   ucx_staged_transport.hpp  the same for device buffers, staged through pinned host memory
//                       (CUDA backend)
// A backend offers its transports in order of preference (made by the rows of the runtime's
// transport table; the CUDA backend's composed in runtime/src/cuda/cuda_transports.cpp), and
// choose_transports() picks, for each peer, the first one that can reach it
// (Transport::can_connect, as NCCL's canConnect): the one place where that choice is made.
//
// Ordering. Groups started on one transport complete in the order they were started (a FIFO):
// a ring step may forward what the previous step received. Stream transports (CUDA) enqueue the
// group on the given stream and complete in stream order; host transports (MPI) complete when
// wait() returns.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cgemm/collective/exchange.hpp"

namespace cgemm {

class Transport {
 public:
  virtual ~Transport() = default;

  /// "copy-engine (CUDA IPC)", "nccl", "mpi".
  virtual std::string name() const = 0;
  /// One line: how it moves data and with what settings.
  virtual std::string describe() const = 0;
  /// Whether this transport can move data between this rank and TP rank `peer`.
  virtual bool can_connect(int peer) const = 0;
  /// "" when the work start() enqueues can be captured into a CUDA graph and replayed (each
  /// replay moving the data again, correctly ordered); else why not, as a clause naming the
  /// transport ("the copy-engine transport numbers ..."). Every transport answers: a new one
  /// that forgets does not compile. The answer depends only on the transport's kind.
  virtual std::string capture_refusal() const = 0;

  /// Collective over the TP group, called by every rank in the same order for every symmetric
  /// buffer: makes `buf` a destination of this transport (a one-sided transport opens the
  /// peers' copies). Throws on every rank alike when some rank cannot. `buf.local` may be null
  /// on a rank whose allocation failed: it then throws on every rank, none waits.
  virtual void attach(const SymmetricBuffer& buf) = 0;
  /// Local: forgets `buf`. Call when no exchange naming it is in flight.
  virtual void detach(const SymmetricBuffer& buf) noexcept = 0;

  /// Starts the exchanges of `group` (validated, every peer reachable, dst attached) as one
  /// group, after this transport's earlier groups; on `stream` (a cudaStream_t) for stream
  /// transports, nullptr for host transports. Returns a handle for wait().
  virtual int64_t start(std::span<const Exchange> group, void* stream) = 0;
  /// Host transports: blocks until group `handle` has completed (both directions). Stream
  /// transports: nothing to do (order on the stream instead).
  virtual void wait(int64_t handle) = 0;
  /// Lets a host transport progress its transfers (called between GEMM chunks).
  virtual void progress() {}
  /// Stream transports whose groups complete only while this host drives them (the CUDA
  /// backend's UCX transport, ucx_staged_transport.hpp): drives every started group until its
  /// stream no longer waits on this host. Others: nothing. The backend calls it before any host
  /// wait on the device, which would otherwise wait for itself.
  virtual void drain() {}
};

/// For each TP rank other than `me`, the first of `candidates` (in order of preference, null
/// entries skipped) that can_connect() to it; nullptr at `me`. Throws cgemm::Error, prefixed
/// with `where`, naming the first peer no candidate reaches.
std::vector<Transport*> choose_transports(std::span<Transport* const> candidates, int me, int tp,
                                          std::string_view where);

/// A group as started: the transports it went to and their handles, for wait().
struct StartedGroup {
  std::vector<std::pair<Transport*, int64_t>> parts;
};

/// Starts `group` on the transports `chosen` (by choose_transports) for its peers: the
/// exchanges of each transport as one group, transports in order of first appearance. An
/// exchange whose send and receive peers map to different transports is an error.
StartedGroup start_group(std::span<Transport* const> chosen, std::span<const Exchange> group,
                         void* stream, std::string_view where);

}  // namespace cgemm
