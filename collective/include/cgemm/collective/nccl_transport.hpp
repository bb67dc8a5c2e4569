#pragma once
// NCCL over the tensor-parallel group: pairwise send/recv for the ring (the transport across
// nodes, and the fallback inside one when copy engines cannot be used) and the collectives of
// the sequential path. Only built with CUDA.
//
// Bootstrap: TP rank 0 creates the unique id and broadcasts it with MPI_Bcast on the TP
// communicator (no files, no sockets of ours); every rank then calls ncclCommInitRankConfig
// with the device that is current at construction. Or the caller lends its own communicator
// over the TP group (a framework that has one already): it is checked against the TP group and
// used as it is, never destroyed here.
//
// SMs: NCCL's send/recv and collectives run as kernels. OverlapOptions::num_sm_for_communication
// is NOT mapped onto NCCL's maxCTAs: capping NCCL at 2 CTAs took send/recv from 300 to 43 GB/s
// and made a concurrent GEMM 9x slower on 2 x H200 (measured). The knob bounds
// the SMs of transports that are meant to share SMs with the GEMM; the copy-engine transport uses
// none. To cap NCCL anyway, set CGEMM_NCCL_MAX_CTAS (and optionally CGEMM_NCCL_MIN_CTAS) to a
// positive integer: they become the communicator's maxCTAs / minCTAs.
//
// NVLink SHARP: when NCCL_NVLS_ENABLE is unset, it is set to 0 before the communicator is made.
// Send/recv and small TP collectives gain nothing from it, and its multicast objects can take
// shared GPUs out of service; set NCCL_NVLS_ENABLE=1 explicitly to allow it.

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cgemm/collective/transport.hpp"
#include "cgemm/core/dtype.hpp"

namespace cgemm {

class NcclTransport final : public Transport {
 public:
  /// Collective over `tp_comm`. `where` prefixes every error message (e.g. "rank 3").
  NcclTransport(MPI_Comm tp_comm, std::string where);
  /// Collective over `tp_comm`: uses `borrowed`, the caller's communicator over the same group,
  /// which must stay alive until this transport is destroyed and which the caller destroys
  /// (this transport never does; the watchdog still aborts it on a timeout, as the job then
  /// ends). Its size (ncclCommCount) must be tp_comm's, its rank (ncclCommUserRank) this
  /// rank's in tp_comm and its device (ncclCommCuDevice) the current one: else cgemm::Error
  /// on every rank of tp_comm alike, with the message of the lowest such rank (e.g. "the
  /// borrowed NCCL communicator has 4 ranks, the TP group 2, on tp rank 1 (world rank 3):
  /// ...").
  /// CGEMM_NCCL_MIN_CTAS / CGEMM_NCCL_MAX_CTAS do not apply: the communicator is configured.
  NcclTransport(MPI_Comm tp_comm, ncclComm_t borrowed, std::string where);
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  std::string name() const override { return "nccl"; }
  /// NCCL's grouped send/recv is capturable (stream-ordered, no host wait).
  std::string capture_refusal() const override { return ""; }
  std::string describe() const override { return "nccl send/recv, " + settings_; }
  /// NCCL reaches every rank of its communicator (inside a node and across nodes).
  bool can_connect(int peer) const override { return peer >= 0 && peer < size_ && peer != rank_; }
  /// Two-sided: receives land in this rank's copy, nothing to open.
  void attach(const SymmetricBuffer&) override {}
  void detach(const SymmetricBuffer&) noexcept override {}
  /// Issues every send and receive of `group` as one NCCL group on `stream`, so both
  /// directions of a ring step (and all peers) progress together. Returns -1 (stream order).
  int64_t start(std::span<const Exchange> group, void* stream) override;
  void wait(int64_t) override {}

  /// dst [size, bytes_per_rank] rank-major.
  void all_gather(const void* src, void* dst, size_t bytes_per_rank, cudaStream_t stream);
  /// dst [count_per_rank] = sum over ranks of src[rank * count_per_rank + i] (bf16/fp16/fp32).
  void reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank,
                      cudaStream_t stream);
  /// In-place sum (bf16/fp16/fp32).
  void all_reduce(void* buf, DType dtype, int64_t count, cudaStream_t stream);
  /// In-place max of `count` floats (the amaxes of current scaling).
  void all_reduce_max(float* buf, int64_t count, cudaStream_t stream);

  /// Throws cgemm::Error when NCCL has recorded an asynchronous error (e.g. a peer failure).
  void check_async_error();

  /// How the communicator was configured: "NCCL defaults", the CTA bounds in force, or
  /// "borrowed" (the caller's).
  std::string settings() const { return settings_; }
  /// "NCCL 2.28.3" (the library loaded at run time).
  static std::string version();

 private:
  void check(ncclResult_t rc, const std::string& call);
  /// MPI ranks of the TP group in MPI_COMM_WORLD, and rank_ / size_ (both constructors).
  void read_group(MPI_Comm tp_comm);
  /// "tp rank p (world rank R)": messages name a peer as the user counts ranks.
  std::string peer(int tp_rank) const;

  ncclComm_t comm_ = nullptr;
  int abort_hook_ = -1;  // the watchdog's (cgemm/core/watchdog.hpp)
  int rank_ = 0, size_ = 1;
  bool healthy_ = true;
  bool borrowed_ = false;  // the caller's communicator: never destroyed here
  std::string where_;
  std::string settings_;
  std::vector<int> world_ranks_;  // of the TP ranks, in MPI_COMM_WORLD
};

}  // namespace cgemm
