#pragma once
// The max of a few floats over every rank of the job (Backend::all_reduce_max on the CUDA
// backend): the amaxes of current scaling, reduced so every piece of a tensor gets the scale of
// the whole.

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <string>

namespace cgemm::cuda {

/// In place: buf[i] (device memory) = max over the ranks of `world` of buf[i], i < count, after
/// the work queued on `stream`; later work on `stream` sees the result. `what` names the call
/// in errors and timeout messages, `where` the rank. Nothing to do on a world of one rank.
///
/// This is the one host round trip of current scaling at world size > 1: the floats are copied
/// to the host (the host waits for `stream`), reduced with MPI_Allreduce under the watchdog, and
/// copied back. A device collective would need an NCCL communicator over the world, and there is
/// none under gpu_sharing (NCCL refuses two ranks of one communicator on one GPU) and none over
/// the world at all (the backend's NCCL communicator is the TP group's); the copy is a few bytes,
/// so what it costs is the wait for the stream, which current scaling needs anyway (the scale of
/// this call depends on the amax of every rank).
void all_reduce_max_world(MPI_Comm world, float* buf, int count, cudaStream_t stream,
                          const std::string& what, const std::string& where);

}  // namespace cgemm::cuda
