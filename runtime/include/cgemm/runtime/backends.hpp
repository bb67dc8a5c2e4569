#pragma once
// Backend factories. Both are collective over the mesh's communicators.

#include <memory>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/options.hpp"

namespace cgemm {

/// Host memory, a BLAS library for GEMMs and MPI point-to-point for the ring.
std::unique_ptr<Backend> make_cpu_backend(const MeshComms& comms, const OverlapOptions& opts);

/// True when cgemm was built with CUDA and this process sees at least one GPU.
bool cuda_backend_available();
/// GPUs this process sees (0 without CUDA or without a GPU).
int cuda_device_count();

/// One GPU per rank (the node-local rank), cuBLASLt GEMMs, NCCL communicators over the TP
/// group bootstrapped over MPI, and copy-engine transport over CUDA IPC when the whole TP
/// group is on one node and opts.use_ce. Throws cgemm::Error when cgemm was built without
/// CUDA, when there is no GPU, or when a node has more ranks than GPUs.
std::unique_ptr<Backend> make_cuda_backend(const MeshComms& comms, const OverlapOptions& opts);

}  // namespace cgemm
