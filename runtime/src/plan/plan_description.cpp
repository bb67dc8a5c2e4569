// Planning without a backend: from a GemmDesc on global shapes and a mesh coordinate to the
// shard geometry, the collective GEMM's programs and the bytes they need, using the sharding
// planner (gemm.py's rules) for every spec, shape and reorder decision.

#include <algorithm>
#include <variant>

#include "cgemm/core/env.hpp"
#include "cgemm/sharding/reorder.hpp"
#include "fsdp/fsdp_gather.hpp"
#include "gemm_layout.hpp"
#include "planning.hpp"
#include "quantization/quantization.hpp"
#include "transport_table.hpp"

namespace cgemm {

namespace {

// gemm.py's workspace rule needs a compute capability; without one, size for Hopper.
constexpr int kDefaultComputeCapability = 90;

SpecEntry entry(const std::string& axis) { return SpecEntry::axis(axis); }

// This rank's coordinate along a spec entry's axes (a tuple is major-to-minor, as JAX).
int64_t coordinate(const SpecEntry& e, const PlanningMesh& m) {
  int64_t idx = 0;
  for (const auto& axis : e.axes) {
    int size = 1, coord = 0;
    if (axis == m.dp_axis) {
      size = m.dp;
      coord = m.dp_rank;
    } else if (m.fsdp > 1 && axis == m.fsdp_axis) {
      size = m.fsdp;
      coord = m.fsdp_rank;
    } else if (axis == m.tpsp_axis) {
      size = m.tp;
      coord = m.tp_rank;
    }
    idx = idx * size + coord;
  }
  return idx;
}

Shape shard_offset(const Shape& local, const PartitionSpec& spec, const PlanningMesh& m) {
  Shape off(local.size(), 0);
  for (size_t d = 0; d < local.size() && d < spec.size(); ++d) {
    off[d] = checked_mul(coordinate(spec[d], m), local[d], "shard offset");
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

// A PartitionSpec names each mesh axis at most once (JAX refuses a spec that maps an axis
// twice). The planner does not check it, and a spec such as ('dp', None, 'dp') would make each
// rank compute only a diagonal block of the output: refused for every operand and the output.
void require_axes_once(const PartitionSpec& spec, const std::string& what) {
  std::vector<std::string> seen;
  for (const SpecEntry& e : spec) {
    for (const std::string& a : e.axes) {
      if (std::find(seen.begin(), seen.end(), a) != seen.end()) {
        throw PlanError(what + ": the spec " + spec_str(spec) + " names mesh axis '" + a +
                        "' more than once (a mesh axis can shard one dim only)");
      }
      seen.push_back(a);
    }
  }
}

// The runtime contracts each operand's contracting dims flattened in storage order. That is
// the GEMM jax.lax.dot_general defines (it pairs lhs_contracting[i] with rhs_contracting[i])
// only when both lists are in storage order and the i-th dims agree in size, and each rank's
// flattened local K is the same slice on both sides only when the i-th dims are sharded alike.
// gemm.py's abstract checks only that the two products agree: the rest is refused here.
void require_paired_contraction(const GemmDesc& desc, const GemmLayouts& layout,
                                const GemmSharding& s, const std::string& where) {
  const std::vector<int64_t>& lc = layout.lhs.contracting;
  const std::vector<int64_t>& rc = layout.rhs.contracting;
  const std::string given = " (given: " + layout.describe(desc.lhs_shape, desc.rhs_shape) + ")";
  if (!std::is_sorted(lc.begin(), lc.end()) || !std::is_sorted(rc.begin(), rc.end())) {
    throw Error(where + ": list each operand's contracting dims in the order they are stored " +
                "(increasing): the runtime contracts them flattened in that order" + given);
  }
  if (lc.size() != rc.size()) {
    // Storage-order flattening is still the GEMM meant when nothing splits K across ranks.
    for (size_t i = 0; i < lc.size(); ++i) {
      if (!s.lhs[static_cast<size_t>(lc[i])].is_none()) {
        throw Error(where + ": lhs and rhs contract a different number of dims and the lhs's " +
                    "contracting dim " + std::to_string(lc[i]) +
                    " is sharded: the ranks' local K slices would not pair" + given);
      }
    }
    for (size_t i = 0; i < rc.size(); ++i) {
      if (!s.rhs[static_cast<size_t>(rc[i])].is_none()) {
        throw Error(where + ": lhs and rhs contract a different number of dims and the rhs's " +
                    "contracting dim " + std::to_string(rc[i]) +
                    " is sharded: the ranks' local K slices would not pair" + given);
      }
    }
    return;
  }
  for (size_t i = 0; i < lc.size(); ++i) {
    const auto l = static_cast<size_t>(lc[i]), r = static_cast<size_t>(rc[i]);
    if (desc.lhs_shape[l] != desc.rhs_shape[r]) {
      throw Error(where + ": contracting dim " + std::to_string(i) + " has size " +
                  std::to_string(desc.lhs_shape[l]) + " on the lhs (dim " + std::to_string(l) +
                  ") and " + std::to_string(desc.rhs_shape[r]) + " on the rhs (dim " +
                  std::to_string(r) + "): paired contracting dims must agree" + given);
    }
    if (s.lhs[l] != s.rhs[r]) {
      throw Error(where + ": contracting dim " + std::to_string(i) + " is sharded as " +
                  spec_str({s.lhs[l]}) + " on the lhs and " + spec_str({s.rhs[r]}) +
                  " on the rhs: each rank would multiply different K slices" + given);
    }
  }
}

// The reductions the collective GEMMs run (gemm.py's _sharded_impl sums the output over the
// planner's reduce axis, then adds the bias): the reduce-scatter's own, over the tp axis; the
// plain GEMM's and the all-gather GEMM's all-reduce over the axis's group (make_plain_gemm and
// make_all_gather_gemm refuse the axes they have no group for). The all-gather's tp group
// gathers the sequence, so it does not also sum over it.
void require_reduction_it_runs(const GemmDesc& desc, const GemmSharding& s, const PlanningMesh& m) {
  if (!s.reduce_spec) return;
  const std::string op(collective_name(desc.collective));
  std::string runs;
  if (desc.collective == CollectiveOp::kReduceScatter && !s.reduce_spec->is_axis(m.tpsp_axis)) {
    // gemm.py refuses this first; the schedule scatters over the tp group.
    runs = "reduces over the tensor-parallel axis '" + m.tpsp_axis + "' only";
  } else if (desc.collective == CollectiveOp::kAllGather && s.reduce_spec->is_axis(m.tpsp_axis)) {
    runs = "gathers the sequence over '" + m.tpsp_axis + "' and does not also sum over it";
  } else {
    return;
  }
  throw Error("GEMM '" + desc.name + "': the " + op + " GEMM of lhs " + spec_str(s.lhs) +
              " @ rhs " + spec_str(s.rhs) + " has its output reduced over " +
              spec_str({*s.reduce_spec}) +
              " (the planner's reduce axis: both contracting dims sharded over it); the " + op +
              " GEMM " + runs);
}

void require_mesh(const PlanningMesh& m) {
  if (m.dp < 1 || m.tp < 1 || m.fsdp < 1) {
    throw Error("mesh: dp=" + std::to_string(m.dp) + ", fsdp=" + std::to_string(m.fsdp) +
                " and tp=" + std::to_string(m.tp) + " must all be at least 1");
  }
  if (m.dp_rank < 0 || m.dp_rank >= m.dp || m.tp_rank < 0 || m.tp_rank >= m.tp || m.fsdp_rank < 0 ||
      m.fsdp_rank >= m.fsdp) {
    throw Error("mesh: rank (dp " + std::to_string(m.dp_rank) + ", fsdp " +
                std::to_string(m.fsdp_rank) + ", tp " + std::to_string(m.tp_rank) +
                ") is outside the dp=" + std::to_string(m.dp) +
                " x fsdp=" + std::to_string(m.fsdp) + " x tp=" + std::to_string(m.tp) + " mesh");
  }
  require_axis_names(m.dp_axis, m.tpsp_axis, m.fsdp, m.fsdp_axis);
}

// What the CPU backend allocates around the programs' ops (runtime/src/cpu/cpu_backend.cpp and
// gemm/src/cpu_gemm.cpp): fp64 copies of a GEMM's lhs block, rhs and output, kept between
// calls at their largest (thread_local vectors), and fp32 temporaries of sums and
// collectives, freed after each op.
struct CpuScratch {
  int64_t a = 0, b = 0, c = 0;  // fp64 elements of the largest lhs block, rhs, output block
  int64_t scratch = 0;          // bytes of the largest temporary
  void add(const Program& p) {
    const std::string what = "CPU backend scratch";
    const auto at_least = [](int64_t& v, int64_t x) { v = std::max(v, x); };
    // Every op kind by name: one added to Op without a line here does not compile.
    const Overloaded count{
        [&](const GemmOp& o) {
          const GemmTask& t = o.task;
          at_least(a, checked_mul(t.m, t.k, what));
          at_least(b, checked_mul(t.k, t.n, what));
          at_least(c, checked_mul(t.m, t.n, what));
        },
        [&](const SumOp& o) {
          // acc and tmp of count floats, the bias in fp32.
          const int64_t n = checked_add(checked_mul(o.count, 2, what), o.bias_len, what);
          at_least(scratch, checked_bytes(n, sizeof(float), what));
        },
        [&](const ReduceScatterOp& o) {
          // The exchanged blocks (tp x count), then a sum of them.
          const int64_t blocks = checked_bytes(o.count_per_rank, dtype_size(o.dtype), what);
          const int64_t sum =
              checked_bytes(checked_mul(o.count_per_rank, 2, what), sizeof(float), what);
          at_least(scratch, checked_add(blocks, sum, what));
        },
        [&](const AllReduceOp& o) {
          at_least(scratch, checked_bytes(o.count, sizeof(float), what));
        },
        [&](const QuantizeOp& o) {
          // The source in fp32 (and its transpose).
          const int64_t n = checked_mul(checked_mul(o.task.rows, o.task.cols, what), 2, what);
          at_least(scratch, checked_bytes(n, sizeof(float), what));
        },
        [&](const AmaxOp& o) { at_least(scratch, checked_bytes(o.count, sizeof(float), what)); },
        [&](const GroupedGemmOp& o) {
          // The loop's GEMMs: at most one group holds the whole ragged extent.
          const GroupedGemmShape& g = o.shape;
          const bool rows = g.form == GroupedForm::kRaggedRows;
          const int64_t m = rows ? g.extent : g.m, k = rows ? g.k : g.extent;
          at_least(a, checked_mul(m, k, what));
          at_least(b, checked_mul(k, g.n, what));
          at_least(c, checked_mul(m, g.n, what));
        },
        // These allocate nothing on the CPU backend.
        [](const GroupSizesToHostOp&) {},
        [](const AmaxReduceOp&) {},
        [](const ScaleOp&) {},
        [](const ForkOp&) {},
        [](const JoinOp&) {},
        [](const ExchangeOp&) {},
        [](const WaitOp&) {},
        [](const ReorderOp&) {},
        [](const CopyOp&) {},
        [](const AllGatherOp&) {},
    };
    for (const Op& op : p.ops) std::visit(count, op);
  }
};

std::string buffer_name(const Ref& r) {
  return std::visit(Overloaded{[](Operand o) { return std::string(Operands::name(o)); },
                               [](Workspace w) { return std::string(workspace_name(w)); }},
                    r.buf);
}

// The GEMMs and exchanges of `p`, for tools (PlanDescription::overlapped / sequential).
ProgramView view_of(const Program& p) {
  ProgramView v;
  const Overloaded add{
      [&](const GemmOp& o) {
        v.gemms.push_back({o.task, buffer_name(o.lhs), buffer_name(o.rhs), buffer_name(o.out),
                           static_cast<int64_t>(o.lhs.offset), static_cast<int64_t>(o.rhs.offset),
                           static_cast<int64_t>(o.out.offset), o.stream, o.label});
      },
      [&](const ExchangeOp& o) {
        ProgramExchange x;
        for (const Transfer& t : o.transfers) x.bytes += static_cast<int64_t>(t.bytes);
        x.transfers = static_cast<int>(o.transfers.size());
        v.exchanges.push_back(x);
      },
      // The rest is neither a GEMM nor a transfer of the ring.
      [](const ForkOp&) {},
      [](const JoinOp&) {},
      [](const WaitOp&) {},
      [](const SumOp&) {},
      [](const ReorderOp&) {},
      [](const CopyOp&) {},
      [](const AllGatherOp&) {},
      [](const ReduceScatterOp&) {},
      [](const AllReduceOp&) {},
      [](const AmaxOp&) {},
      [](const AmaxReduceOp&) {},
      [](const ScaleOp&) {},
      [](const QuantizeOp&) {},
      // Its GEMMs' shapes are known per call only (GroupedGemmPlan plans no ProgramView).
      [](const GroupedGemmOp&) {},
      [](const GroupSizesToHostOp&) {},
  };
  for (const Op& op : p.ops) std::visit(add, op);
  return v;
}

PlanBytes plan_bytes(const PlannedGemm& p, const PlanningOptions& opt) {
  const PlanDescription& d = p.description;
  const std::string what = "GEMM '" + d.desc.name + "' bytes";
  PlanBytes b;
  b.lhs =
      checked_bytes(num_elements(d.lhs_local), dtype_size(lhs_input_dtype(d.desc)), what + " lhs");
  b.rhs =
      checked_bytes(num_elements(d.rhs_local), dtype_size(rhs_input_dtype(d.desc)), what + " rhs");
  b.bias = p.geometry.has_bias ? checked_bytes(num_elements(d.bias_local),
                                               dtype_size(d.desc.out_dtype), what + " bias")
                               : 0;
  b.out = checked_bytes(num_elements(d.out_local), dtype_size(d.desc.out_dtype), what + " out");
  b.overlapped = p.kind.overlapped.workspace;
  b.sequential = p.kind.sequential.workspace;
  // What the plan holds: each workspace at the largest size any program execute() may run
  // needs (Engine::prepare makes exactly these when the plan is made).
  WorkspaceSizes held;
  for (const Program* q : execute_programs(p.kind)) {
    for (Workspace w : kWorkspaces) {
      workspace_bytes(held, w) =
          std::max(workspace_bytes(held, w), workspace_bytes(q->workspace, w));
    }
  }
  b.workspace = held.total();
  b.fsdp_ring = held.fsdp_ring;
  if (opt.backend == BackendKind::kCpu) {
    CpuScratch cpu;
    for (const Program* q : execute_programs(p.kind)) cpu.add(*q);
    const int64_t doubles = checked_add(checked_add(cpu.a, cpu.b, what), cpu.c, what);
    b.cpu_fp64_copies = checked_bytes(doubles, sizeof(double), what + " fp64 copies");
    b.cpu_scratch = cpu.scratch;
  } else {
    const int cc = opt.compute_capability > 0 ? opt.compute_capability : kDefaultComputeCapability;
    b.cublas_workspace_per_stream = cublas_workspace_bytes(cc);
    b.cublas_workspace = d.abstract.workspace_bytes;
  }
  return b;
}

}  // namespace

int64_t WorkspaceSizes::total() const {
  const std::string what = "workspace bytes";
  int64_t t =
      checked_add(checked_add(ring, send, what), checked_add(work_in, work_out, what), what);
  t = checked_add(t, checked_add(quant, scales, what), what);
  return checked_add(t, fsdp_ring, what);
}

void require_axis_names(const std::string& dp, const std::string& tpsp, int fsdp,
                        const std::string& fsdp_axis) {
  if (dp.empty() || tpsp.empty() || dp == tpsp) {
    throw Error("mesh: the dp and tpsp axes need two different, non-empty names");
  }
  // Without an fsdp axis its name is unused: any mesh of two axes stays as it was.
  if (fsdp > 1 && (fsdp_axis.empty() || fsdp_axis == dp || fsdp_axis == tpsp)) {
    throw Error("mesh: the dp, fsdp and tpsp axes need three different, non-empty names (got '" +
                dp + "', '" + fsdp_axis + "', '" + tpsp + "')");
  }
}

int64_t PlanBytes::operands() const {
  const std::string what = "operand bytes";
  return checked_add(checked_add(lhs, rhs, what), checked_add(bias, out, what), what);
}

int64_t PlanBytes::total() const {
  const std::string what = "plan bytes";
  int64_t t = checked_add(operands(), workspace, what);
  t = checked_add(t, cublas_workspace, what);
  t = checked_add(t, cpu_fp64_copies, what);
  return checked_add(t, cpu_scratch, what);
}

namespace {

// The planner's answer for this rank: specs (infer_gemm_sharding, checked against the given
// ones), local shapes, the output and gemm_abstract's validation, as gemm.py's outer
// abstract. Fills r's sharding, shapes and abstract; returns the geometry's layout fields.
GemmGeometry plan_shards(const GemmDesc& desc, const PlanningMesh& m, const PlanningOptions& opt,
                         PlanDescription& r, std::optional<FsdpGather>& fsdp) {
  Mesh mesh;
  mesh.axes = {{m.dp_axis, m.dp}, {m.tpsp_axis, m.tp}};
  MeshResource resource;
  resource.dp_resource = m.dp_axis;
  resource.tpsp_resource = m.tpsp_axis;
  if (m.fsdp > 1) {  // without, the mesh and the planner's MeshResource are dp x tp's
    mesh.axes.insert(mesh.axes.begin() + 1, {m.fsdp_axis, m.fsdp});
    resource.fsdp_resource = m.fsdp_axis;
  }

  const std::string where = "GEMM '" + desc.name + "'";
  const size_t lhs_nd = desc.lhs_shape.size(), rhs_nd = desc.rhs_shape.size();
  // Element counts first: a global shape whose count overflows int64 is refused here.
  num_elements(desc.lhs_shape);
  num_elements(desc.rhs_shape);

  GemmShardingInput si;
  si.mesh_resource = resource;
  si.lhs = {lhs_nd, desc.lhs_spec};
  si.rhs = {rhs_nd, desc.rhs_spec};
  if (desc.bias_shape && num_elements(*desc.bias_shape) > 0) {
    si.bias = OperandSpec{desc.bias_shape->size(), desc.bias_spec};
  }
  si.contracting_dims = desc.contracting_dims;
  si.collective_op = desc.collective;
  si.transpose_batch_sequence = desc.transpose_batch_sequence;
  r.sharding = infer_gemm_sharding(si);
  const GemmSharding& sharding = r.sharding;
  require_same_spec(pad_spec(desc.lhs_spec, lhs_nd, "lhs"), sharding.lhs, where + " lhs");
  // FSDP: a dim given sharded over the fsdp axis that the planner gathers is the plan's to
  // gather (fsdp_gather.hpp); the rest of the spec must be the planner's.
  PartitionSpec rhs_given = pad_spec(desc.rhs_spec, rhs_nd, "rhs");
  const int fsdp_dim = fsdp_gathered_dim(rhs_given, sharding.rhs, m, where + " rhs");
  if (fsdp_dim >= 0) rhs_given[static_cast<size_t>(fsdp_dim)] = SpecEntry::none();
  require_same_spec(rhs_given, sharding.rhs, where + " rhs");
  require_axes_once(sharding.lhs, where + " lhs");
  require_axes_once(sharding.rhs, where + " rhs");
  require_fsdp_not_twice(sharding, m, where);
  require_axes_once(sharding.out, where + " output");
  require_reduction_it_runs(desc, sharding, m);

  // The GEMM the runtime runs (gemm_layout.hpp); which layouts run is checked after gemm.py's
  // own checks (consecutive contracting dims, equal contracting sizes) in gemm_abstract below.
  const GemmLayouts layout = gemm_layouts(lhs_nd, rhs_nd, desc.contracting_dims);
  GemmGeometry g;
  g.name = desc.name;
  g.lhs_transposed = layout.lhs.transposed;
  g.rhs_transposed = layout.rhs.transposed;

  r.lhs_local = local_shape(desc.lhs_shape, sharding.lhs, mesh, where + " lhs");
  r.rhs_local = local_shape(desc.rhs_shape, sharding.rhs, mesh, where + " rhs");
  g.has_bias = si.bias.has_value();
  r.bias_local =
      g.has_bias ? local_shape(*desc.bias_shape, sharding.bias, mesh, where + " bias") : Shape{0};
  // gemm.py's abstract: the lhs's non-contracting dims, then the rhs's.
  r.out_global = layout.lhs.kept_shape(desc.lhs_shape);
  const Shape rhs_kept = layout.rhs.kept_shape(desc.rhs_shape);
  r.out_global.insert(r.out_global.end(), rhs_kept.begin(), rhs_kept.end());
  num_elements(r.out_global);
  r.out_local = local_shape(r.out_global, sharding.out, mesh, where + " output");

  // Operand validation as gemm.py's outer abstract (is_outer: shapes, dtypes, contracting
  // sizes, bias, workspace). The inner abstract's extra rules (sequence_dim == 1 and a
  // bfloat16 output) are limits of Transformer Engine's collective kernels, not of the
  // collective: cgemm's schedule also runs sequence-first activations and fp16/fp32, so
  // they are not applied here (cgemm-plan still reproduces them exactly).
  GemmAbstractInput ai;
  ai.lhs = {r.lhs_local, lhs_input_dtype(desc)};
  ai.rhs = {r.rhs_local, rhs_input_dtype(desc)};
  const QuantizationDesc& q = desc.quantization;
  ai.contracting_dims = desc.contracting_dims;
  // A layout that does not run is refused below, after gemm.py's checks of the operands as
  // given (its quantized copies have no layout to check).
  if (q.mode != ScalingMode::kNoScaling && layout.runs_as_one_gemm()) {
    // The GEMM cgemm runs: both operands quantized into copies contracting their trailing
    // dims, the lhs as [M..., K...] and the rhs as [N..., K...] (the NT layout gemm.py
    // requires of FP8 below SM100; quantization.cpp transposes an operand stored otherwise).
    const ScalingModeRow& row = scaling_mode_row(q.mode);
    const auto nt = [](const Shape& s, const OperandLayout& l, std::vector<int>& dims) {
      Shape copy = l.kept_shape(s);
      std::vector<int64_t> contracting = l.contracting;
      std::sort(contracting.begin(), contracting.end());  // storage order, as the copy holds them
      dims.clear();
      for (int64_t d : contracting) {
        dims.push_back(static_cast<int>(copy.size()));
        copy.push_back(s[static_cast<size_t>(d)]);
      }
      return copy;
    };
    ai.lhs = {nt(r.lhs_local, layout.lhs, ai.contracting_dims.first),
              row.fp8_formats ? q.lhs_format : row.fixed_format};
    ai.rhs = {nt(r.rhs_local, layout.rhs, ai.contracting_dims.second),
              row.fp8_formats ? q.rhs_format : row.fixed_format};
    ai.lhs_scale_shape = {1};
    ai.rhs_scale_shape = {1};
    ai.scaling_mode = q.mode;
  }
  if (g.has_bias) ai.bias = TensorDesc{r.bias_local, desc.out_dtype};
  ai.out_dtype = desc.out_dtype;
  ai.collective_op = desc.collective;
  ai.is_outer = true;
  ai.sequence_dim = sharding.sequence_dim.value_or(1);
  ai.tpsp_size = m.tp;
  // The CPU backend has no compute capability; gemm.py's workspace rule then sizes for the
  // GPU generation cgemm is built for (sm 90), which only the report shows.
  ai.compute_capability =
      opt.compute_capability > 0 ? opt.compute_capability : kDefaultComputeCapability;
  ai.num_max_streams = opt.overlap.num_max_streams;
  r.abstract = gemm_abstract(ai);
  // gemm.py shards the bias as the rhs's non-contracting dims whatever it was given (JAX
  // reshards it); cgemm reads the caller's buffer as that shard, so the given spec must match.
  // Checked after gemm_abstract, whose bias shape check names a wrongly shaped bias first.
  if (si.bias) {
    require_same_spec(pad_spec(desc.bias_spec, si.bias->ndim, "bias"), sharding.bias,
                      where + " bias");
  }
  if (!layout.runs_as_one_gemm()) {
    throw Error(where + ": the runtime runs the GEMM as one 2-D GEMM on the operands as stored, " +
                "so each operand's contracting dims must be its leading or its trailing dims; " +
                "got " + layout.describe(desc.lhs_shape, desc.rhs_shape));
  }
  require_paired_contraction(desc, layout, sharding, where);
  // The all-gather's ring moves the lhs's rows [B, S]: it contracts its trailing dims (one or
  // several). The reduce-scatter also reads a transposed lhs [K..., B, S] (it moves outputs).
  // The rhs is flattened as the plain GEMM's ([K, 2, N] too).
  if (desc.collective == CollectiveOp::kAllGather && (lhs_nd < 2 || layout.lhs.transposed)) {
    throw Error(where + ": the runtime runs all_gather GEMMs on an lhs [B, S, K...] " +
                "contracting its trailing dims (the ring moves its rows); a transposed lhs " +
                "(contracting its leading dims) is not run: got " +
                layout.describe(desc.lhs_shape, desc.rhs_shape));
  }
  // The local GEMM, flattened: lhs [M, K] (or [K, M]), rhs [K, N] (or [N, K]).
  g.k = layout.lhs.contracting_size(r.lhs_local);
  g.lhs_rows = layout.lhs.kept_size(r.lhs_local);
  g.n = layout.rhs.kept_size(r.rhs_local);
  g.ldb = g.rhs_transposed ? g.k : g.n;
  // The caller holds 1/fsdp of the rhs the GEMM multiplies by (fsdp 1: the whole of it).
  if (fsdp_dim >= 0 && m.fsdp > 1) fsdp = plan_fsdp_gather(desc, layout, fsdp_dim, m, r);
  // FSDP's weight gradient: the output's sum over fsdp scattered over it, not all-reduced.
  r.out_spec = sharding.out;
  if (desc.fsdp_scatter_dim < -1) {
    throw PlanError(where + ": fsdp_scatter_dim " + std::to_string(desc.fsdp_scatter_dim) +
                    ": -1 (no reduce-scatter over fsdp) or an output dim");
  }
  if (desc.fsdp_scatter_dim >= 0) g.fsdp_scatter = plan_fsdp_scatter(desc, layout, m, r);
  // The local GEMM's output grows tp-fold by the all-gather and shrinks by the
  // reduce-scatter: it must hold exactly this rank's shard of the output.
  int64_t produced = num_elements(r.abstract.out_shape);
  if (desc.collective == CollectiveOp::kAllGather) {
    produced = checked_mul(produced, m.tp, where + " gathered output");
  }
  if (desc.collective == CollectiveOp::kReduceScatter) produced /= m.tp;
  if (desc.fsdp_scatter_dim >= 0) produced /= m.fsdp;
  if (produced != num_elements(r.out_local)) {
    throw PlanError(where + ": the local GEMM output " + shape_str(r.abstract.out_shape) +
                    " after the " + std::string(collective_name(desc.collective)) +
                    " does not hold the sharded output " + shape_str(r.out_local));
  }

  return g;
}

// The chunk geometry's inputs: the mesh, the overlap knobs and the local GEMM, flattened.
void fill_geometry(GemmGeometry& g, const GemmDesc& desc, const PlanningMesh& m,
                   const PlanningOptions& opt, const PlanDescription& r) {
  const int backend_streams =
      opt.backend_streams > 0 ? opt.backend_streams : opt.overlap.num_max_streams;
  g.tp = m.tp;
  g.me = m.tp_rank;
  g.fsdp = m.fsdp;
  g.fsdp_rank = m.fsdp_rank;
  g.fsdp_scatter_dp_sum = g.fsdp_scatter != FsdpScatter::kNone && r.sharding.reduce_spec &&
                          r.sharding.reduce_spec->is_tuple;
  g.dp = m.dp;
  g.num_streams = std::max(1, std::min(opt.overlap.num_max_streams, backend_streams));
  g.aggregate = opt.overlap.aggregate_all_gather;
  g.pieces = m.tp > 1 ? opt.overlap.chunks_per_rank : 1;  // tp 1: no ring to split
  g.in = desc.dtype;
  g.out = desc.out_dtype;
  // gemm.py fuses the bias only when the output is not reduced (_sharded_impl's fuse_bias).
  g.fuse_bias = g.has_bias && !r.sharding.reduce_spec.has_value();
  g.lhs_local = r.lhs_local;
  g.out_local = r.out_local;
  g.need_reorder = !desc.transpose_batch_sequence;
  g.sequence_dim = r.sharding.sequence_dim.value_or(-1);
  g.reduce_in_fp32 = all_reduce_in_float32();
  if (r.sharding.reduce_spec) {
    const SpecEntry& axis = *r.sharding.reduce_spec;
    g.reduce_axis = spec_str({axis});
    const bool data_tuple = axis.is_tuple && axis.axes.size() == 2 &&
                            std::count(axis.axes.begin(), axis.axes.end(), m.dp_axis) == 1 &&
                            std::count(axis.axes.begin(), axis.axes.end(), m.fsdp_axis) == 1;
    if (axis.is_axis(m.tpsp_axis)) g.reduce_groups = {Group::kTp};
    // Issue 43 item 2: a contracting dim sharded over the data-parallel axis (gemm.py psums
    // over it, then adds the bias): the all-reduce over the dp group.
    if (axis.is_axis(m.dp_axis)) g.reduce_groups = {Group::kDp};
    if (m.fsdp > 1 && axis.is_axis(m.fsdp_axis)) g.reduce_groups = {Group::kFsdp};
    if (m.fsdp > 1 && data_tuple) g.reduce_groups = {Group::kFsdp, Group::kDp};
  }
  g.collective = desc.collective;
}

// What the description says of the planned kind: offsets, schedule, chunks, bytes and the
// programs' views. Refuses a split that leaves chunks of 0 rows.
void describe(PlannedGemm& out, const PlanningMesh& m, const PlanningOptions& opt) {
  const GemmDesc& desc = out.description.desc;
  PlanDescription& r = out.description;
  const GemmGeometry& g = out.geometry;
  const GemmSharding& sharding = r.sharding;
  const std::string where = "GEMM '" + desc.name + "'";
  const CollectiveGemm& c = out.kind;
  // A split that leaves a chunk without rows plans a schedule with nothing to move: refuse
  // it here rather than let a later check fail for a reason that is not the real one.
  if (c.overlappable && (g.chunk_rows <= 0 || (g.strided && g.seq_rows <= 0))) {
    const int64_t rows = g.strided ? g.seq_total : g.lhs_rows;
    throw PlanError(where + ": the " + std::string(collective_name(desc.collective)) + " splits " +
                    std::to_string(rows) + " " +
                    (g.strided ? "sequence rows per batch block" : "rows") +
                    " into tp=" + std::to_string(m.tp) +
                    " chunks of 0 rows; the sequence must hold at least tp rows per chunk "
                    "(lhs " +
                    shape_str(desc.lhs_shape) + ", local " + shape_str(r.lhs_local) + ")");
  }

  r.lhs_offset = shard_offset(r.lhs_local, sharding.lhs, m);
  r.rhs_spec = sharding.rhs;
  if (r.fsdp_dim >= 0) r.rhs_spec[static_cast<size_t>(r.fsdp_dim)] = entry(m.fsdp_axis);
  r.rhs_offset = shard_offset(r.rhs_local, r.rhs_spec, m);
  r.out_offset = shard_offset(r.out_local, r.out_spec, m);
  r.bias_offset = g.has_bias ? shard_offset(r.bias_local, sharding.bias, m) : Shape{0};
  r.schedule_summary = std::string(collective_name(desc.collective)) + ": " + c.summary;
  r.overlappable = c.overlappable;
  r.chunks = c.overlappable && m.tp > 1 ? m.tp * g.pieces : 1;
  // A piece's rows: pieces of strided chunks are whole batch blocks of seq_rows rows each.
  r.chunk_rows = g.strided ? g.seq_rows : g.chunk_rows / g.pieces;
  r.num_streams = g.num_streams;
  r.gemm_rows = c.gemm_rows;
  r.local_flops =
      2.0 * static_cast<double>(c.gemm_rows) * static_cast<double>(g.n) * static_cast<double>(g.k);
  r.bytes = plan_bytes(out, opt);
  r.overlapped = view_of(c.overlapped);
  r.sequential = view_of(c.sequential);
}

}  // namespace

PlannedGemm plan_gemm_programs(const GemmDesc& desc, const PlanningMesh& m,
                               const PlanningOptions& opt) {
  require_mesh(m);
  if (opt.overlap.num_max_streams < 1) {
    throw Error("num_max_streams must be >= 1, got " + std::to_string(opt.overlap.num_max_streams));
  }
  PlannedGemm out;
  out.description.desc = desc;
  std::optional<FsdpGather> fsdp;
  out.geometry = plan_shards(desc, m, opt, out.description, fsdp);
  fill_geometry(out.geometry, desc, m, opt, out.description);
  const std::optional<QuantizationPlan> quant =
      plan_quantization(desc, out.geometry, out.description, m, opt);
  out.kind = choose_collective_gemm(out.geometry).make(out.geometry);
  if (quant) {
    add_quantization(out.kind, *quant, desc.name);
    out.kind.summary += ", quantized " + quantization_summary(desc.quantization);
  }
  if (fsdp) add_fsdp_gather(out.kind, *fsdp, out.geometry);
  if (!out.kind.overlapped_gathering && out.kind.no_gathered_lhs.empty()) {
    out.kind.no_gathered_lhs = "GEMM '" + desc.name + "': gathered_lhs is an output of " +
                               "all-gather GEMMs only; this GEMM's collective is " +
                               std::string(collective_name(desc.collective));
  }
  for (const Program* p : {&out.kind.overlapped, &out.kind.sequential, &out.kind.gemm_only,
                           &out.kind.collective_only}) {
    p->check_writes(desc.name);
  }
  for (const std::optional<Program>* p :
       {&out.kind.overlapped_gathering, &out.kind.sequential_gathering}) {
    if (*p) (*p)->check_writes(desc.name);
  }
  describe(out, m, opt);
  return out;
}

PlanDescription plan_gemm(const GemmDesc& desc, const PlanningMesh& mesh,
                          const PlanningOptions& options) {
  return plan_gemm_programs(desc, mesh, options).description;
}

std::string predict_transport(BackendKind backend, int tp, bool tp_group_on_one_host, bool use_ce,
                              TransportKind transport) {
  const TransportOffer o = offer_transport(
      transport,
      GroupView{
          .backend = backend, .size = tp, .on_one_host = tp_group_on_one_host, .use_ce = use_ce});
  return o.served() ? o.name : "refused: " + o.refusal;
}

}  // namespace cgemm
