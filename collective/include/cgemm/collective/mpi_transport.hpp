#pragma once
// MPI point-to-point transport of the ring, for the CPU backend: non-blocking send/recv on
// the TP communicator. Host memory only (Open MPI here is not CUDA-aware).

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cgemm/collective/transport.hpp"

namespace cgemm {

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MPI_Comm tp_comm);

  std::string name() const override { return "mpi"; }
  std::string capture_refusal() const override {
    return "the MPI transport moves host memory inside MPI calls of this host: nothing of it "
           "runs on a CUDA stream";
  }
  std::string describe() const override { return "MPI non-blocking send/recv on host memory"; }
  bool can_connect(int peer) const override { return peer >= 0 && peer < size_ && peer != rank_; }
  void attach(const SymmetricBuffer&) override {}
  void detach(const SymmetricBuffer&) noexcept override {}
  /// Posts a non-blocking send and receive for every exchange of `group` (`stream` unused);
  /// returns a handle for wait(). Messages larger than 2 GiB are split, so any size works.
  int64_t start(std::span<const Exchange> group, void* stream) override;
  /// Blocks until every exchange of the group with this handle has completed (both halves).
  void wait(int64_t handle) override;
  /// Lets MPI progress outstanding transfers (called between GEMM chunks).
  void progress() override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  int tag_ = 0;
  int64_t next_handle_ = 0;
  struct Pending {
    int64_t handle;
    std::vector<MPI_Request> requests;
  };
  std::vector<Pending> pending_;
};

}  // namespace cgemm
