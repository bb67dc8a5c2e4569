// Planning: from a GemmDesc on global shapes to this rank's shard geometry, using the
// sharding planner (gemm.py's rules) for every spec, shape and reorder decision.

#include "cgemm/runtime/plan.hpp"

#include <algorithm>
#include <sstream>

#include "cgemm/sharding/reorder.hpp"
#include "collective_gemm.hpp"
#include "plan_impl.hpp"

namespace cgemm {

namespace {

// gemm.py's workspace rule needs a compute capability; without a GPU, size for Hopper.
constexpr int kDefaultComputeCapability = 90;

SpecEntry entry(const std::string& axis) { return SpecEntry::axis(axis); }

int sanitize(int d, size_t ndim) { return d < 0 ? d + static_cast<int>(ndim) : d; }

// This device's coordinate along a spec entry's axes (a tuple is major-to-minor, as JAX).
int64_t coordinate(const SpecEntry& e, const Context& ctx) {
  int64_t idx = 0;
  for (const auto& axis : e.axes) {
    const int size = ctx.mesh().axis_size(axis);
    int coord = 0;
    if (axis == ctx.mesh_config().dp_axis) coord = ctx.comms().dp_rank();
    if (axis == ctx.mesh_config().tpsp_axis) coord = ctx.comms().tp_rank();
    idx = idx * size + coord;
  }
  return idx;
}

Shape shard_offset(const Shape& local, const PartitionSpec& spec, const Context& ctx) {
  Shape off(local.size(), 0);
  for (size_t d = 0; d < local.size() && d < spec.size(); ++d) {
    off[d] = coordinate(spec[d], ctx) * local[d];
  }
  return off;
}

void require_same_spec(const PartitionSpec& given, const PartitionSpec& planned,
                       const std::string& what) {
  if (given != planned) {
    throw PlanError(what + ": the planner shards it as " + spec_str(planned) + ", not as given " +
                    spec_str(given) + "; cgemm does not reshard, pass the operand sharded as " +
                    spec_str(planned));
  }
}

}  // namespace

GemmDesc tensor_sequence_parallel_gemm(const Context& ctx, std::string name,
                                       CollectiveOp collective, int64_t batch, int64_t seq_len,
                                       int64_t hidden_in, int64_t hidden_out, DType dtype,
                                       bool bias, bool transpose_batch_sequence) {
  const std::string& dp = ctx.mesh_config().dp_axis;
  const std::string& tpsp = ctx.mesh_config().tpsp_axis;
  const SpecEntry none = SpecEntry::none();
  GemmDesc d;
  d.name = std::move(name);
  d.collective = collective;
  d.dtype = dtype;
  d.out_dtype = dtype;
  d.transpose_batch_sequence = transpose_batch_sequence;
  d.lhs_shape = transpose_batch_sequence ? Shape{seq_len, batch, hidden_in}
                                         : Shape{batch, seq_len, hidden_in};
  d.rhs_shape = {hidden_in, hidden_out};
  d.contracting_dims = {{2}, {0}};
  // Activation specs are written batch-first, then swapped for sequence-first layouts.
  PartitionSpec x;
  if (collective == CollectiveOp::kAllGather) {
    x = {entry(dp), entry(tpsp), none};
    d.rhs_spec = {none, entry(tpsp)};
    d.bias_spec = {entry(tpsp)};
  } else {
    x = {entry(dp), none, entry(tpsp)};
    d.rhs_spec = {entry(tpsp), none};
    d.bias_spec = {none};
  }
  if (transpose_batch_sequence) std::swap(x[0], x[1]);
  d.lhs_spec = x;
  if (bias) d.bias_shape = Shape{hidden_out};
  return d;
}

GemmPlan::GemmPlan(Context& ctx, GemmDesc desc) : ctx_(ctx), desc_(std::move(desc)) {
  const Mesh& mesh = ctx.mesh();
  const std::string where = "GEMM '" + desc_.name + "'";
  const size_t lhs_nd = desc_.lhs_shape.size(), rhs_nd = desc_.rhs_shape.size();

  GemmShardingInput si;
  si.mesh_resource = ctx.mesh_resource();
  si.lhs = {lhs_nd, desc_.lhs_spec};
  si.rhs = {rhs_nd, desc_.rhs_spec};
  if (desc_.bias_shape && num_elements(*desc_.bias_shape) > 0) {
    si.bias = OperandSpec{desc_.bias_shape->size(), desc_.bias_spec};
  }
  si.contracting_dims = desc_.contracting_dims;
  si.collective_op = desc_.collective;
  si.transpose_batch_sequence = desc_.transpose_batch_sequence;
  sharding_ = infer_gemm_sharding(si);
  require_same_spec(pad_spec(desc_.lhs_spec, lhs_nd, "lhs"), sharding_.lhs, where + " lhs");
  require_same_spec(pad_spec(desc_.rhs_spec, rhs_nd, "rhs"), sharding_.rhs, where + " rhs");

  // Only the layouts the schedule runs: lhs contracts its last dim, rhs is 2-D.
  const auto& [lc, rc] = desc_.contracting_dims;
  if (lhs_nd < 2 || rhs_nd != 2 || lc.size() != 1 || rc.size() != 1 ||
      sanitize(lc[0], lhs_nd) != static_cast<int>(lhs_nd) - 1) {
    throw Error(where + ": the runtime runs lhs [..., K] contracting its last dim with a 2-D rhs;" +
                " got lhs " + shape_str(desc_.lhs_shape) + ", rhs " + shape_str(desc_.rhs_shape));
  }
  GemmGeometry g;
  g.name = desc_.name;
  g.rhs_transposed = sanitize(rc[0], rhs_nd) == 1;

  lhs_local_ = local_shape(desc_.lhs_shape, sharding_.lhs, mesh, where + " lhs");
  rhs_local_ = local_shape(desc_.rhs_shape, sharding_.rhs, mesh, where + " rhs");
  g.has_bias = si.bias.has_value();
  bias_local_ =
      g.has_bias ? local_shape(*desc_.bias_shape, sharding_.bias, mesh, where + " bias") : Shape{0};
  out_global_.assign(desc_.lhs_shape.begin(), desc_.lhs_shape.end() - 1);
  out_global_.push_back(desc_.rhs_shape[g.rhs_transposed ? 0 : 1]);
  out_local_ = local_shape(out_global_, sharding_.out, mesh, where + " output");

  // Operand validation as gemm.py's outer abstract (is_outer: shapes, dtypes, contracting
  // sizes, bias, workspace). The inner abstract's extra rules (sequence_dim == 1 and a
  // bfloat16 output) are limits of Transformer Engine's collective kernels, not of the
  // collective: cgemm's schedule also runs sequence-first activations and fp16/fp32, so
  // they are not applied here (cgemm-plan still reproduces them exactly).
  GemmAbstractInput ai;
  ai.lhs = {lhs_local_, desc_.dtype};
  ai.rhs = {rhs_local_, desc_.dtype};
  if (g.has_bias) ai.bias = TensorDesc{bias_local_, desc_.out_dtype};
  ai.out_dtype = desc_.out_dtype;
  ai.contracting_dims = desc_.contracting_dims;
  ai.collective_op = desc_.collective;
  ai.is_outer = true;
  ai.sequence_dim = sharding_.sequence_dim.value_or(1);
  ai.tpsp_size = ctx.comms().tp();
  // The CPU backend has no compute capability; gemm.py's workspace rule then sizes for the
  // GPU generation cgemm is built for (sm 90), which only the report shows.
  const int cc = ctx.backend().compute_capability();
  ai.compute_capability = cc > 0 ? cc : kDefaultComputeCapability;
  ai.num_max_streams = ctx.overlap().num_max_streams;
  abstract_ = gemm_abstract(ai);
  // The local GEMM's output grows tp-fold by the all-gather and shrinks by the
  // reduce-scatter: it must hold exactly this rank's shard of the output.
  int64_t produced = num_elements(abstract_.out_shape);
  if (desc_.collective == CollectiveOp::kAllGather) produced *= ctx.comms().tp();
  if (desc_.collective == CollectiveOp::kReduceScatter) produced /= ctx.comms().tp();
  if (produced != num_elements(out_local_)) {
    throw PlanError(where + ": the local GEMM output " + shape_str(abstract_.out_shape) +
                    " after the " + std::string(collective_name(desc_.collective)) +
                    " does not hold the sharded output " + shape_str(out_local_));
  }

  g.tp = ctx.comms().tp();
  g.me = ctx.comms().tp_rank();
  g.dp = ctx.comms().dp();
  g.num_streams = std::max(1, std::min(ctx.overlap().num_max_streams, ctx.backend().num_streams()));
  g.aggregate = ctx.overlap().aggregate_all_gather;
  g.in = desc_.dtype;
  g.out = desc_.out_dtype;
  g.k = lhs_local_.back();
  g.n = out_local_.back();
  g.ldb = rhs_local_[1];
  g.lhs_rows = num_elements(lhs_local_) / std::max<int64_t>(g.k, 1);
  // gemm.py fuses the bias only when the output is not reduced (_sharded_impl's fuse_bias).
  g.fuse_bias = g.has_bias && !sharding_.reduce_spec.has_value();
  g.lhs_local = lhs_local_;
  g.out_local = out_local_;
  g.need_reorder = !desc_.transpose_batch_sequence;
  g.sequence_dim = sharding_.sequence_dim.value_or(-1);
  if (sharding_.reduce_spec) {
    g.reduce_axis = spec_str({*sharding_.reduce_spec});
    g.reduce_over_tp = sharding_.reduce_spec->is_axis(ctx.mesh_config().tpsp_axis);
  }
  CollectiveGemm kind = collective_gemm_factory(desc_.collective)(g);
  impl_ = std::make_unique<Impl>(ctx.backend(), ctx.comms().world_rank(), std::move(g),
                                 std::move(kind));
  impl_->policy = ctx.overlap().policy;
  impl_->use_overlap = impl_->policy != OverlapPolicy::kNever;
}

GemmPlan::~GemmPlan() = default;

Shape GemmPlan::lhs_offset() const { return shard_offset(lhs_local_, sharding_.lhs, ctx_); }
Shape GemmPlan::rhs_offset() const { return shard_offset(rhs_local_, sharding_.rhs, ctx_); }
Shape GemmPlan::out_offset() const { return shard_offset(out_local_, sharding_.out, ctx_); }
Shape GemmPlan::bias_offset() const {
  return impl_->geometry.has_bias ? shard_offset(bias_local_, sharding_.bias, ctx_) : Shape{0};
}

double GemmPlan::local_flops() const {
  const GemmGeometry& g = impl_->geometry;
  return 2.0 * static_cast<double>(impl_->kind.gemm_rows) * static_cast<double>(g.n) *
         static_cast<double>(g.k);
}

std::string GemmPlan::schedule_summary() const {
  const CollectiveGemm& c = impl_->kind;
  std::string s = std::string(collective_name(desc_.collective)) + ": " + c.summary;
  if (c.overlappable) s += ", transport " + impl_->engine.backend().transport();
  return s;
}

}  // namespace cgemm
