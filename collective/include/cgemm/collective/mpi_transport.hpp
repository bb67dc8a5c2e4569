#pragma once
// MPI point-to-point transport of the ring, for the CPU backend: non-blocking send/recv on
// the TP communicator. Host memory only.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cgemm {

class MpiTransport {
 public:
  explicit MpiTransport(MPI_Comm tp_comm);

  /// Posts a non-blocking send of `bytes` at `src` to `send_peer` and a receive of `bytes`
  /// into `dst` from `recv_peer`; returns a handle for wait(). Messages larger than 2 GiB
  /// are split, so any size works.
  int64_t start(const void* src, int send_peer, void* dst, int recv_peer, size_t bytes);
  /// Blocks until the exchange with this handle has completed (both halves).
  void wait(int64_t handle);
  /// Lets MPI progress outstanding transfers (called between GEMM chunks).
  void progress();

 private:
  MPI_Comm comm_;
  int tag_ = 0;
  int64_t next_handle_ = 0;
  struct Pending {
    int64_t handle;
    std::vector<MPI_Request> requests;
  };
  std::vector<Pending> pending_;
};

}  // namespace cgemm
