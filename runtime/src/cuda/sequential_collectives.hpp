#pragma once
// The collectives of one group (Backend::all_gather, reduce_scatter, all_reduce; the world
// max's step over the group) on the CUDA backend. One implementation per file, chosen per group
// when the backend is made:
//   nccl_collectives.cpp  NCCL's collectives, when the group has an NCCL communicator
//   ce_collectives.cpp    exchanges over the copy engines into a staging buffer, then a local
//                         copy or an fp32 sum in rank order, when GPUs are shared (NCCL refuses
//                         two ranks of one communicator on one GPU)
//   host_collectives.cpp  MPI through the host, for a group with neither (GPUs shared and the
//                         group spans nodes: only a dp group can, tp's refuses the job)

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cgemm/collective/nccl_transport.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/backend.hpp"
#include "compute.hpp"
#include "streams.hpp"
#include "trace.hpp"

namespace cgemm::cuda {

/// The calls have the Backend calls' meaning and arguments (cgemm/runtime/backend.hpp);
/// `stream` is a compute stream, `label` may be null.
class SequentialCollectives {
 public:
  virtual ~SequentialCollectives() = default;
  virtual void all_gather(const void* src, void* dst, size_t bytes_per_rank, int stream,
                          const char* label) = 0;
  virtual void reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank,
                              int stream, const char* label) = 0;
  virtual void all_reduce(void* buf, DType dtype, int64_t count, int stream, const char* label) = 0;
  /// In place: buf[i] = the max over the group's ranks of buf[i] (fp32), on `stream`.
  virtual void all_reduce_max(float* buf, int count, int stream, const char* label) = 0;
  /// Makes now whatever a call staging `bytes` (its whole group's blocks) would make on first
  /// use (Backend::reserve_collectives). Collective over the group.
  virtual void reserve(size_t bytes) { static_cast<void>(bytes); }
};

/// The call's label, or `what` when it has none.
inline std::string named(const char* label, const char* what) {
  return label != nullptr ? std::string(label) : std::string(what);
}

/// NCCL's collectives on `nccl`'s communicator of `size` ranks, traced as "collective" spans.
std::unique_ptr<SequentialCollectives> make_nccl_collectives(NcclTransport& nccl, Streams& streams,
                                                             Trace& trace, int size);

/// Over `group`, built on `backend`'s own calls (exchanges, partial sums, symmetric buffers),
/// so they run through the same checks, FIFO and traces as the ring's; `streams` and `compute`
/// (the max's kernel) are the backend's. `backend` owns the result and outlives it.
class DeviceMemory;

/// Over `comm` (`group` names it in the watchdog's lines, e.g. "DP group world ranks 0, 2"),
/// through `memory`'s synchronous, counted copies to and from the host.
std::unique_ptr<SequentialCollectives> make_host_collectives(DeviceMemory& memory, Streams& streams,
                                                             MPI_Comm comm, std::string group,
                                                             std::string where);

std::unique_ptr<SequentialCollectives> make_ce_collectives(Backend& backend, Group group,
                                                           Streams& streams, Compute& compute,
                                                           std::string where);

}  // namespace cgemm::cuda
