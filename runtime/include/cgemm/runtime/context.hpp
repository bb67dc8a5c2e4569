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
#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/options.hpp"
#include "cgemm/sharding/partition_spec.hpp"

namespace cgemm {

class SharedRing;  // runtime/src/program/shared_ring.hpp

/// The dp x fsdp x tp mesh and the names of its axes (Transformer Engine's MeshResource: the tp
/// axis plays the tpsp role, i.e. tensor parallel with sequence parallelism; the fsdp axis is
/// fsdp_resource, the ranks that shard one replica's weights). World rank
/// (dp_rank * fsdp + fsdp_rank) * tp + tp_rank (mesh_comms.hpp). dp counts the replicas: with
/// fsdp > 1 the activations' batch is sharded over (dp, fsdp), and a weight given sharded over
/// the fsdp axis where gemm.py's rule gathers it is gathered inside the GEMM (plan.hpp).
struct MeshConfig {
  int dp = 1;
  int tp = 0;  // 0: world size / (dp x fsdp)
  std::string dp_axis = "dp";
  std::string tpsp_axis = "tpsp";
  int fsdp = 1;
  std::string fsdp_axis = "fsdp";
};

/// The backend rule refused the job (e.g. --backend cuda on a host with more ranks than GPUs).
/// Decided collectively: thrown alike on every rank of the world, so a caller may report it
/// once and end the job normally.
class BackendRuleError : public Error {
 public:
  using Error::Error;
};

class Context {
 public:
  /// Collective over `world`. Builds the mesh communicators and the backend by the backend
  /// rule, the same on every rank:
  ///  - cpu: the CPU backend.
  ///  - cuda: every rank needs a GPU of its own (the GPU of a rank is its local rank modulo
  ///    the GPUs it sees; GPUs are told apart by UUID, so CUDA_VISIBLE_DEVICES is honoured);
  ///    else BackendRuleError naming the rank or the host and its counts. With
  ///    backend.gpu_sharing, ranks may share a GPU instead (copy-engine transport, no NCCL).
  ///  - auto: cuda when that rule holds on every rank, else cpu (backend_notice() says why
  ///    when a GPU was present but not enough of them).
  /// Throws BackendRuleError for a refused rule, cgemm::Error for anything else.
  Context(MPI_Comm world, const MeshConfig& mesh, const BackendOptions& backend,
          const OverlapOptions& overlap);
  Context(MPI_Comm world, const MeshConfig& mesh, BackendKind backend,
          const OverlapOptions& overlap)
      : Context(world, mesh,
                BackendOptions{backend, false, watchdog::running() ? watchdog::timeout_s() : 300.0},
                overlap) {}
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const MeshComms& comms() const { return *comms_; }
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }
  /// The planner's view: Mesh {dp_axis: dp, fsdp_axis: fsdp, tpsp_axis: tp} and its
  /// MeshResource (dp_resource, fsdp_resource, tpsp_resource).
  const Mesh& mesh() const { return mesh_; }
  const MeshResource& mesh_resource() const { return resource_; }
  const MeshConfig& mesh_config() const { return mesh_config_; }
  const OverlapOptions& overlap() const { return overlap_; }
  /// Why the backend rule chose the CPU backend under auto although GPUs were present, or
  /// how GPUs are shared; empty otherwise. The same text on every rank.
  const std::string& backend_notice() const { return notice_; }
  /// The most ranks that share one GPU anywhere in the job (1: no GPU is shared, or CPU).
  /// Above 1, times measure nothing: kernels of the sharing processes time-slice the GPU.
  int ranks_per_gpu() const { return ranks_per_gpu_; }
  /// The ranks (this one included) whose buffers share this rank's memory: the ranks of its
  /// host on the CPU backend, the ranks on its GPU (by UUID) on the CUDA backend. For the
  /// memory check (memory_check.hpp).
  int ranks_sharing_memory() const { return ranks_sharing_memory_; }
  /// Bytes of the fsdp ring the context's FSDP plans share (docs/FSDP.md): one gathered weight,
  /// the largest any living plan needs; 0 while none does.
  int64_t fsdp_ring_bytes() const;
  /// That ring itself (internal: GemmPlan's engines share it). Inline, so a program that makes
  /// plans of a Context but never a Context links no backend.
  SharedRing& fsdp_ring() { return *fsdp_ring_; }
  /// Bytes of the buffer the layer pair's dgrad reorders a weight's column shards through
  /// (layers/fsdp_weight_gather.hpp), shared like the ring; 0 while none is needed.
  int64_t fsdp_reorder_bytes() const;
  SharedRing& fsdp_reorder() { return *fsdp_reorder_; }

 private:
  MeshConfig mesh_config_;
  OverlapOptions overlap_;
  Mesh mesh_;
  MeshResource resource_;
  std::string notice_;
  int ranks_per_gpu_ = 1;
  int ranks_sharing_memory_ = 1;
  std::unique_ptr<MeshComms> comms_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<SharedRing> fsdp_ring_;     // after backend_: released before it
  std::unique_ptr<SharedRing> fsdp_reorder_;  // likewise
};

}  // namespace cgemm
