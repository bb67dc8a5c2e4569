#pragma once
// The entry point of the library: a user's MPI program creates one Context from its own
// communicator and mesh, then makes GemmPlans (plan.hpp) and executes them on its buffers.
//
//   cgemm::Context ctx(MPI_COMM_WORLD, {.dp = 2, .tp = 4}, cgemm::BackendKind::kAuto, {});
//   cgemm::GemmPlan plan(ctx, cgemm::tensor_sequence_parallel_gemm(ctx, ...));
//   plan.execute(lhs, rhs, bias, out);  // as often as you like

#include <mpi.h>

#include <memory>
#include <string>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/options.hpp"
#include "cgemm/sharding/partition_spec.hpp"

namespace cgemm {

/// The dp x tp mesh and the names of its axes (Transformer Engine's MeshResource: the
/// tp axis plays the tpsp role, i.e. tensor parallel with sequence parallelism).
struct MeshConfig {
  int dp = 1;
  int tp = 0;  // 0: world size / dp
  std::string dp_axis = "dp";
  std::string tpsp_axis = "tpsp";
};

class Context {
 public:
  /// Collective over `world`. Builds the mesh communicators and the backend (kAuto: CUDA
  /// when built with CUDA and a GPU is present, else CPU). Throws cgemm::Error.
  Context(MPI_Comm world, const MeshConfig& mesh, BackendKind backend,
          const OverlapOptions& overlap);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const MeshComms& comms() const { return *comms_; }
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }
  /// The planner's view: Mesh {dp_axis: dp, tpsp_axis: tp} and its MeshResource.
  const Mesh& mesh() const { return mesh_; }
  const MeshResource& mesh_resource() const { return resource_; }
  const MeshConfig& mesh_config() const { return mesh_config_; }
  const OverlapOptions& overlap() const { return overlap_; }

 private:
  MeshConfig mesh_config_;
  OverlapOptions overlap_;
  Mesh mesh_;
  MeshResource resource_;
  std::unique_ptr<MeshComms> comms_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace cgemm
