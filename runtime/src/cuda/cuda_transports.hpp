#pragma once
// The transports a rank of the CUDA backend offers a group's peers through choose_transports
// (cgemm/collective/transport.hpp), composed in one place from transports the transport table
// makes (transport_table.hpp's make_transport): copy engines over CUDA IPC when the whole group is
// on this node and use_ce allows it, NCCL send/recv for every peer the copy engines do not reach,
// and no NCCL communicator at all when GPUs are shared; or, with transport = ucx, UCX for every
// peer. Only built with CUDA.

#include <memory>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/collective/nccl_transport.hpp"
#include "cgemm/collective/transport.hpp"

namespace cgemm {

struct CudaTransports {
  std::unique_ptr<NcclTransport> nccl;  // null when GPUs are shared
  std::unique_ptr<Transport> ce;        // the copy engines; null: ce_why_not says why
  std::string ce_why_not;
  std::unique_ptr<Transport> ucx;  // transport = ucx only (ucx_staged_transport.hpp)

  /// Those that exist, in order of preference: copy engines where they reach a peer, NCCL for
  /// the rest; with transport = ucx, UCX alone.
  std::vector<Transport*> offered() const;
  /// Transport::drain of those that need it: before any host wait on the device.
  void drain() const;
  /// One line: the transport of the ring, or why the copy engines are not used.
  std::string describe() const;
  /// Throws cgemm::Error when NCCL has recorded an asynchronous error (e.g. a peer failure).
  void check_async_error() const;
};

/// Collective over group `group` of `comms` (every rank of it reaches it in the same order; the
/// same rules for tp and dp), with the device that is current. `gpu_sharing`: some GPU of the
/// job is shared, so no NCCL communicator is made (NCCL refuses two ranks of one on one GPU) and
/// the copy engines must be usable: else it throws on every rank of the group alike.
/// `borrowed_nccl`: the caller's communicator over the TP group, used instead of making one
/// (NcclTransport's borrowing constructor; null: make one); refused with gpu_sharing. `ucx`
/// (transport = ucx): the ring's peers are reached through UCX alone, staged through pinned host
/// memory, and no copy-engine transport is made; it throws on every rank alike when UCX cannot
/// reach every peer, or cgemm was built without UCX. Both are the TP group's: for dp, refused.
/// `where` prefixes the errors.
CudaTransports make_cuda_transports(const MeshComms& comms, Group group, bool use_ce,
                                    bool gpu_sharing, ncclComm_t borrowed_nccl, bool ucx,
                                    const std::string& where);

}  // namespace cgemm
