#include "cgemm/runtime/context.hpp"

#include "cgemm/runtime/backends.hpp"

namespace cgemm {

namespace {
int world_size(MPI_Comm world) {
  int size = 0;
  check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
  return size;
}
}  // namespace

Context::Context(MPI_Comm world, const MeshConfig& mesh, BackendKind backend,
                 const OverlapOptions& overlap)
    : mesh_config_(mesh), overlap_(overlap) {
  const int size = world_size(world);
  if (mesh_config_.dp < 1 || size % mesh_config_.dp != 0) {
    throw Error("mesh: dp=" + std::to_string(mesh_config_.dp) + " does not divide the world size " +
                std::to_string(size));
  }
  if (mesh_config_.tp == 0) mesh_config_.tp = size / mesh_config_.dp;
  if (mesh_config_.dp_axis == mesh_config_.tpsp_axis || mesh_config_.dp_axis.empty() ||
      mesh_config_.tpsp_axis.empty()) {
    throw Error("mesh: the dp and tpsp axes need two different, non-empty names");
  }
  if (overlap_.num_max_streams < 1) {
    throw Error("num_max_streams must be >= 1, got " + std::to_string(overlap_.num_max_streams));
  }
  mesh_.axes = {{mesh_config_.dp_axis, mesh_config_.dp}, {mesh_config_.tpsp_axis, mesh_config_.tp}};
  resource_.dp_resource = mesh_config_.dp_axis;
  resource_.tpsp_resource = mesh_config_.tpsp_axis;
  comms_ = std::make_unique<MeshComms>(world, mesh_config_.dp, mesh_config_.tp);

  if (backend == BackendKind::kAuto) {
    // Every rank must pick the same backend: CUDA only if all ranks see a GPU.
    int have = cuda_backend_available() ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, comms_->world()),
              "MPI_Allreduce(backend)");
    backend = have ? BackendKind::kCuda : BackendKind::kCpu;
  }
  backend_ = backend == BackendKind::kCuda ? make_cuda_backend(*comms_, overlap_)
                                           : make_cpu_backend(*comms_, overlap_);
}

Context::~Context() = default;

}  // namespace cgemm
