// GemmPlan: the planning of plan_gemm (plan_description.cpp) on a Context's mesh, rank and
// backend, and the engine that runs the planned programs on that backend.

#include "cgemm/runtime/plan.hpp"

#include <algorithm>
#include <climits>
#include <exception>
#include <sstream>

#include "plan_impl.hpp"
#include "planning.hpp"

namespace cgemm {

PlanningMesh planning_mesh(const Context& ctx) {
  PlanningMesh m;
  m.dp = ctx.comms().dp();
  m.tp = ctx.comms().tp();
  m.dp_axis = ctx.mesh_config().dp_axis;
  m.tpsp_axis = ctx.mesh_config().tpsp_axis;
  m.dp_rank = ctx.comms().dp_rank();
  m.tp_rank = ctx.comms().tp_rank();
  m.fsdp = ctx.comms().fsdp();
  m.fsdp_axis = ctx.mesh_config().fsdp_axis;
  m.fsdp_rank = ctx.comms().fsdp_rank();
  return m;
}

PlanningOptions planning_options(const Context& ctx) {
  PlanningOptions opt;
  opt.overlap = ctx.overlap();
  opt.backend = ctx.backend().kind();
  // The CPU backend has no compute capability (0): planning then sizes for sm 90.
  opt.compute_capability = ctx.backend().compute_capability();
  opt.backend_streams = ctx.backend().num_streams();
  return opt;
}

GemmDesc tensor_sequence_parallel_gemm(const Context& ctx, std::string name,
                                       CollectiveOp collective, int64_t batch, int64_t seq_len,
                                       int64_t hidden_in, int64_t hidden_out, DType dtype,
                                       bool bias, bool transpose_batch_sequence) {
  return tensor_sequence_parallel_gemm(planning_mesh(ctx), std::move(name), collective, batch,
                                       seq_len, hidden_in, hidden_out, dtype, bias,
                                       transpose_batch_sequence);
}

GemmPlan::GemmPlan(Context& ctx, GemmDesc desc) : ctx_(ctx), desc_(std::move(desc)) {
  PlannedGemm p = plan_gemm_programs(desc_, planning_mesh(ctx), planning_options(ctx));
  sharding_ = p.description.sharding;
  abstract_ = p.description.abstract;
  lhs_local_ = p.description.lhs_local;
  rhs_local_ = p.description.rhs_local;
  bias_local_ = p.description.bias_local;
  out_local_ = p.description.out_local;
  out_global_ = p.description.out_global;
  impl_ = std::make_unique<Impl>(ctx.backend(), ctx.comms().world_rank(), &ctx.fsdp_ring(),
                                 std::move(p.geometry), std::move(p.kind));
  impl_->description = std::move(p.description);
  impl_->call_name = "GEMM '" + desc_.name + "'";
  Impl& im = *impl_;
  im.policy = ctx.overlap().policy;
  const GemmGeometry& g = im.geometry;
  im.chunk_flop = g.piece_flop();
  // An FSDP gather (fsdp > 1) always has something to hide under the GEMMs it feeds: auto
  // overlaps it (no threshold measured yet; the sequential path gathers the weight first).
  im.use_overlap =
      im.policy == OverlapPolicy::kAlways ||
      (im.policy == OverlapPolicy::kAuto &&
       ((im.kind.overlappable && g.tp > 1 && im.chunk_flop >= kAutoOverlapMinChunkFlop) ||
        im.kind.fsdp > 1));
  // Every workspace execute() may use, made now (the ring collectively: plans are made on
  // every rank in the same order), so no call allocates.
  // A rank's allocation may fail alone (its memory): every rank learns it here, so none goes on
  // to the next plan's collective allocation while another has thrown.
  std::exception_ptr failure;
  try {
    im.engine.prepare(execute_programs(im.kind));
  } catch (...) {
    failure = std::current_exception();
  }
  int failed = failure ? ctx.comms().world_rank() : INT_MAX;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MIN, ctx.comms().world()),
            "MPI_Allreduce(plan workspaces allocated)");
  if (failure) std::rethrow_exception(failure);
  if (failed != INT_MAX) {
    throw Error("GEMM '" + desc_.name + "': world rank " + std::to_string(failed) +
                " could not allocate the plan's workspaces (its message says why)");
  }
}

GemmPlan::~GemmPlan() = default;

const PlanDescription& GemmPlan::description() const { return impl_->description; }
Shape GemmPlan::lhs_offset() const { return impl_->description.lhs_offset; }
Shape GemmPlan::rhs_offset() const { return impl_->description.rhs_offset; }
Shape GemmPlan::out_offset() const { return impl_->description.out_offset; }
Shape GemmPlan::bias_offset() const { return impl_->description.bias_offset; }

double GemmPlan::local_flops() const { return impl_->description.local_flops; }

std::string GemmPlan::schedule_summary() const {
  const CollectiveGemm& c = impl_->kind;
  std::string s = impl_->description.schedule_summary;
  if (c.overlappable || c.fsdp > 1) s += ", transport " + impl_->engine.backend().transport();
  return s;
}

}  // namespace cgemm
