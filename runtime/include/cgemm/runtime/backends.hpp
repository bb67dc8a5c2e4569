#pragma once
// Backend factories. Both are collective over the mesh's communicators. Context (context.hpp)
// decides which one a job gets and where each rank's GPU is; a user's program normally
// never calls these directly.

#include <memory>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/options.hpp"

namespace cgemm {

/// Host memory, a BLAS library for GEMMs and, for the ring, MPI point-to-point (`transport`
/// auto or mpi) or UCX puts (ucx). Throws BackendRuleError on every rank of the world alike when
/// the transport is one the CPU backend has not (nccl, ce), when this cgemm has no UCX, or when
/// some rank cannot make its UCX context or reach a TP peer over it (naming the rank and why).
std::unique_ptr<Backend> make_cpu_backend(const MeshComms& comms, const OverlapOptions& opts,
                                          TransportKind transport = TransportKind::kAuto);

/// True when cgemm was built with CUDA (-DCGEMM_WITH_CUDA=ON), GPU or not.
bool cuda_backend_built();
/// True when cgemm was built with CUDA and this process sees at least one GPU.
bool cuda_backend_available();
/// GPUs this process sees (0 without CUDA or without a GPU).
int cuda_device_count();
/// The UUID of each GPU this process sees, by device index, as 32 hex digits (empty without
/// CUDA or without a GPU). Under CUDA_VISIBLE_DEVICES two ranks may see the same GPU under
/// different indices: the UUID is what tells that they share it.
std::vector<std::string> cuda_device_uuids();

/// Where a rank's CUDA backend runs (chosen by Context's backend rule).
struct CudaPlacement {
  int device = 0;            // CUDA device index, as this process numbers them
  int ranks_per_gpu = 1;     // ranks of this host on this rank's GPU
  bool gpu_sharing = false;  // some GPU of the job is shared: no NCCL anywhere, copy engines only
  /// BackendOptions::nccl_comm: the caller's ncclComm_t over this rank's TP group, used instead
  /// of a communicator of the backend's own (borrowed: never destroyed by it); null: make one.
  void* nccl_comm = nullptr;
};

/// cuBLASLt GEMMs on `placement.device`; the ring over copy engines (CUDA IPC) when the whole
/// TP group is on one node and opts.use_ce, else NCCL send/recv; the sequential path's
/// collectives over NCCL, or over the copy engines when placement.gpu_sharing (then no NCCL
/// communicator is created, and the copy engines must be usable: else it throws on every TP
/// rank alike). `transport` kUcx: the ring over UCX alone, device buffers staged through
/// pinned host memory (collective/ucx_staged_transport.hpp), the sequential path's collectives
/// as before; it throws on every TP rank alike when UCX cannot reach every peer or cgemm was
/// built without UCX. The other kinds are the Context's to apply (through opts.use_ce).
/// Throws cgemm::Error when cgemm was built without CUDA or there is no GPU.
std::unique_ptr<Backend> make_cuda_backend(const MeshComms& comms, const OverlapOptions& opts,
                                           const CudaPlacement& placement,
                                           TransportKind transport = TransportKind::kAuto);

/// Whether the borrowed NCCL communicator `nccl_comm` (CudaPlacement::nccl_comm) holds this
/// rank's TP group, NCCL rank = tp rank: collective over the world of `comms`, after every
/// rank's CUDA backend was made on it (so its size, rank and GPU passed, and every member of
/// every borrowed communicator takes part). Each rank all-gathers its world rank over the
/// communicator itself (ncclAllGather of one int into device memory, on a stream of its own,
/// the host waiting under the watchdog) and compares the list with its TP group's world ranks
/// (world rank = dp rank * tp + tp rank). A mismatch anywhere (or a failed all-gather) throws
/// cgemm::Error on every rank of the job with one message, the lowest such world rank's, e.g.
/// "nccl_comm: the borrowed NCCL communicator's members are world ranks {0, 3} in NCCL rank
/// order, this rank's TP group is world ranks {0, 1}, on world rank 0: ...". Without CUDA:
/// cgemm::Error (never reached: a borrowed communicator is refused before).
void check_borrowed_nccl_members(const MeshComms& comms, void* nccl_comm);

}  // namespace cgemm
