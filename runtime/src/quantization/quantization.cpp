#include "quantization.hpp"

#include <algorithm>

#include "cgemm/core/env.hpp"
#include "cgemm/core/float8.hpp"
#include "cgemm/runtime/quantization_names.hpp"

namespace cgemm {

namespace {

constexpr size_t kAlign = 256;  // cuBLASLt wants 16-byte aligned FP8 operands; be generous

size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

std::string fmt_name(DType t) {
  switch (t) {
    case DType::kFloat8E4M3:
      return "e4m3";
    case DType::kFloat8E5M2:
      return "e5m2";
    case DType::kFloat4E2M1:
      return "e2m1";
    default:
      return std::string(dtype_name(t));
  }
}

// The checks of gemm.py's impl for MXFP8 with a collective (not is_outer, 689-713): no padding
// then, so both sides of each operand's flatten axis must be multiples of 128, and the lhs
// scale's sequence dim must split over tp for the reorder.
void check_mxfp8_collective(const GemmGeometry& g, const PlanDescription& r, int64_t rhs_first,
                            int64_t rhs_last) {
  const std::string where = "GEMM '" + g.name + "': ";
  // gemm.py's lhs flatten axis: the first of the lhs's trailing contracting dims.
  size_t flatten_axis = r.lhs_local.size();
  for (int64_t k = 1; flatten_axis > 0 && k < g.k;) k *= r.lhs_local[--flatten_axis];
  if (g.lhs_rows % 128 != 0 || g.k % 128 != 0) {
    throw PlanError(where +
                    "MXFP8 + Collective AG/RS requires LHS dimensions before and after the "
                    "flatten axis to be multiples of 128. Got lhs.shape=" +
                    shape_str(r.lhs_local) + ", lhs_flatten_axis=" + std::to_string(flatten_axis));
  }
  if (rhs_first % 128 != 0 || rhs_last % 128 != 0) {
    throw PlanError(where +
                    "MXFP8 + Collective AG/RS requires RHS dimensions before and after the "
                    "flatten axis to be multiples of 128. Got rhs.shape=" +
                    shape_str(r.rhs_local));
  }
  const int seq = g.sequence_dim >= 0 ? g.sequence_dim : 1;
  const int64_t scale_seq = r.lhs_local[static_cast<size_t>(seq)];
  if (scale_seq % g.tp != 0) {
    Shape scale = r.lhs_local;
    scale.back() /= 32;
    throw PlanError(where +
                    "MXFP8 + Collective AG/RS requires RHS scale inv sequence dimension to be "
                    "multiples of tpsp_axis_size. Got lhs_scale_inv.shape=" +
                    shape_str(scale) + ", tpsp_axis_size=" + std::to_string(g.tp) +
                    ", sequence_dim=" + std::to_string(seq));
  }
}

// The modes a backend can run: the CPU backend emulates every mode; the CUDA backend has kernels
// for the per-tensor modes only (block scaling would also need cuBLASLt's block-scaled GEMMs,
// compute capability 10.0), so a mode without them is refused when planned, on any GPU.
void check_backend(const GemmDesc& d, const PlanningOptions& opt) {
  const ScalingMode m = d.quantization.mode;
  const ScalingModeRow& row = scaling_mode_row(m);
  if (opt.backend == BackendKind::kCpu && row.cpu) return;
  if (!row.cuda_kernels) {
    throw Error("GEMM '" + d.name + "': scaling " + std::string(scaling_mode_name(m)) +
                " runs on the CPU backend's emulation only (backend = cpu): the CUDA backend " +
                "has no block-scaling kernels yet, on any GPU (cuBLASLt's block-scaled GEMMs " +
                "would also need compute capability 10.0)");
  }
  const int cc = opt.compute_capability > 0 ? opt.compute_capability : 90;
  if (cc < row.cuda_min_compute_capability) {
    throw Error("GEMM '" + d.name + "': scaling " + std::string(scaling_mode_name(m)) +
                " needs cuBLASLt's block-scaled GEMMs, on a GPU of compute capability 10.0 or "
                "newer; this GPU is " +
                std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
                " (the CPU backend emulates it: backend = cpu)");
  }
}

// cuBLASLt's rule for FP8 GEMMs: every operand and every leading dimension 16-byte aligned;
// a GEMM that breaks it has no algorithm, which the GPU finds only when it runs, after every
// rank planned and allocated (and the CPU backend, which has no such rule, runs it). So the
// planner refuses it on every backend, --dry_run included: the quantized lhs rows (k FP8
// bytes; its chunks start at multiples of them), the quantized rhs rows ([n, k]: k bytes) and
// the output rows (n elements of the output dtype; ldc = n, and chunks start at multiples).
void check_fp8_alignment(const GemmDesc& d, const GemmGeometry& g, const PlanDescription& r) {
  constexpr int64_t kAlignBytes = 16;
  const std::string where =
      "GEMM '" + d.name + "' (scaling " + std::string(scaling_mode_name(d.quantization.mode)) +
      ", " + std::string(collective_name(d.collective)) + ", lhs " + shape_str(d.lhs_shape) +
      ", rhs " + shape_str(d.rhs_shape) + "; this rank's lhs " + shape_str(r.lhs_local) + ", rhs " +
      shape_str(r.rhs_local) + ", out " + shape_str(r.out_local) + "): ";
  const std::string rule =
      "FP8 GEMMs need 16-byte aligned rows (cuBLASLt's alignment rule for FP8 operands and "
      "leading dimensions; refused on every backend so that no GPU meets it at run time)";
  if (g.k % kAlignBytes != 0) {
    throw Error(where +
                "the quantized lhs and rhs rows hold the contracting dim of each "
                "GEMM, k=" +
                std::to_string(g.k) + " FP8 bytes, not a multiple of 16: " + rule +
                "; make the contracting dim each rank multiplies (K, or K / tp when it is "
                "sharded) a multiple of 16");
  }
  const int64_t out_size = static_cast<int64_t>(dtype_size(d.out_dtype));
  if (g.n * out_size % kAlignBytes != 0) {
    throw Error(where + "the output rows of each GEMM hold n=" + std::to_string(g.n) + " " +
                std::string(dtype_name(d.out_dtype)) + " elements, " +
                std::to_string(g.n * out_size) + " bytes, not a multiple of 16: " + rule +
                "; make n (N, or N / tp when it is sharded) a multiple of " +
                std::to_string(kAlignBytes / out_size));
  }
}

// Pre-quantized operands (QuantizationDesc::lhs_quantized, rhs_quantized): a per-tensor scale_inv
// only, and the layout Hopper's FP8 GEMM reads, since cgemm does not transpose FP8 bytes.
void check_given_operands(const GemmDesc& d, const GemmGeometry& g, const PlanDescription& r) {
  const QuantizationDesc& q = d.quantization;
  if (!q.lhs_quantized && !q.rhs_quantized) return;
  const std::string where = "GEMM '" + d.name + "'";
  if (!is_tensor_scaling(q.mode)) {
    throw Error(where + ": a pre-quantized " + (q.lhs_quantized ? "lhs" : "rhs") +
                " takes one scale_inv per tensor (scaling current or delayed); scaling " +
                std::string(scaling_mode_name(q.mode)) +
                " quantizes both operands itself here (its block scales are not taken from the "
                "caller)");
  }
  const std::string rule =
      "Hopper's FP8 GEMM reads both operands contracting their last dim (gemm.py's NT "
      "layout rule), and cgemm does not transpose FP8 bytes";
  if (q.lhs_quantized && g.lhs_transposed) {
    throw Error(where + ": the pre-quantized lhs " + shape_str(r.lhs_local) +
                " contracts its leading dims; " + rule +
                ": pass its rowwise copy [M..., K...] contracting its trailing dims");
  }
  if (q.rhs_quantized && !g.rhs_transposed) {
    throw Error(where + ": the pre-quantized rhs " + shape_str(r.rhs_local) +
                " contracts its leading dims ([K..., N...]); " + rule +
                ": pass its colwise copy [N..., K...] (a [K, N] weight as [N, K]) with the rhs "
                "contracting dims its trailing ones");
  }
}

}  // namespace

std::string quantization_summary(const QuantizationDesc& q) {
  if (q.mode == ScalingMode::kNoScaling) return "";
  std::string s = std::string(scaling_mode_name(q.mode));
  const ScalingModeRow& row = scaling_mode_row(q.mode);
  if (!row.fp8_formats)
    return s + " " + fmt_name(row.fixed_format) + " x " + fmt_name(row.fixed_format);
  s += " " + fmt_name(q.lhs_format) + " x " + fmt_name(q.rhs_format);
  if (q.mode == ScalingMode::kDelayedTensorScaling) {
    s += " (history " + std::to_string(q.recipe.amax_history_len) + ", " +
         (q.recipe.algo == AmaxAlgo::kMax ? "max" : "most_recent") + ")";
  }
  if (is_tensor_scaling(q.mode) && q.recipe.margin != 0) {
    s += " margin " + std::to_string(q.recipe.margin);
  }
  return s;
}

std::optional<QuantizationPlan> plan_quantization(const GemmDesc& d, GemmGeometry& g,
                                                  const PlanDescription& r,
                                                  const PlanningMesh& mesh,
                                                  const PlanningOptions& opt) {
  const QuantizationDesc& q = d.quantization;
  const std::string where = "GEMM '" + d.name + "'";
  if (q.mode == ScalingMode::kNoScaling) {
    if (q.lhs_quantized || q.rhs_quantized) {
      throw Error(where + ": a pre-quantized " + (q.lhs_quantized ? "lhs" : "rhs") +
                  " needs a per-tensor scaling mode (scaling = current or delayed), which sets " +
                  "how the GEMM scales it; got none");
    }
    if (is_fp8(d.dtype) || d.dtype == DType::kFloat4E2M1) {
      throw Error(where + ": dtype " + std::string(dtype_name(d.dtype)) +
                  " needs a scaling mode (scaling = " + scaling_option_choices(false) +
                  "); cgemm quantizes high-precision inputs itself");
    }
    return std::nullopt;
  }
  if (d.dtype != DType::kFloat32 && d.dtype != DType::kBFloat16 && d.dtype != DType::kFloat16) {
    throw Error(where + ": a quantized GEMM takes its lhs and rhs in float32, bfloat16 or " +
                "float16 and quantizes them itself; got dtype " + std::string(dtype_name(d.dtype)));
  }
  if (q.recipe.amax_history_len < 1 || q.recipe.amax_history_len > kMaxAmaxHistoryLen) {
    throw Error(where + ": amax_history_len must be 1 to " + std::to_string(kMaxAmaxHistoryLen) +
                " (2^23), got " + std::to_string(q.recipe.amax_history_len));
  }
  if (q.recipe.margin < 0 || q.recipe.margin > 127) {
    throw Error(where + ": margin must be in [0, 127], got " + std::to_string(q.recipe.margin));
  }
  const ScalingModeRow& row = scaling_mode_row(q.mode);
  if (!row.collective && d.collective != CollectiveOp::kNone) {
    // gemm.py's _te_gemm asserts it before binding the primitive.
    throw PlanError(where + ": Collective GEMM is not yet supported with " +
                    std::string(scaling_mode_name(q.mode)) +
                    " quantization. Only DELAYED_TENSOR_SCALING, CURRENT_TENSOR_SCALING, and "
                    "MXFP8_1D_SCALING are supported.");
  }
  check_given_operands(d, g, r);
  check_backend(d, opt);
  if (is_tensor_scaling(q.mode)) check_fp8_alignment(d, g, r);

  QuantizationPlan p;
  p.desc = q;
  p.src = d.dtype;
  p.lhs_rows = g.lhs_rows;
  p.k = g.k;
  p.n = g.n;
  p.rhs_source_transposed = g.rhs_transposed;
  p.lhs_source_transposed = g.lhs_transposed;
  if (!row.fp8_formats) p.desc.lhs_format = p.desc.rhs_format = row.fixed_format;
  p.scaling = row.layout;
  p.rule = row.rule;
  if (is_mxfp8(q.mode) && g.collective != CollectiveOp::kNone) {
    check_mxfp8_collective(g, r, p.k, p.n);
  }
  static_cast<void>(mesh);

  // kQuant's layout; sizes are below the checked lhs and rhs byte counts of planning.
  const int block = row.block;
  if (block > 0 && p.k % block != 0) {
    // Each scale covers `block` consecutive elements of the contracting dim: a partial block
    // has no scale, and the quantization would fail only when the GEMM runs.
    throw Error(where + ": scaling " + std::string(scaling_mode_name(q.mode)) +
                " scales blocks of " + std::to_string(block) +
                " elements along the contracting dim, so each GEMM's k must be a multiple of " +
                std::to_string(block) + "; k=" + std::to_string(p.k) + " (lhs " +
                shape_str(d.lhs_shape) + ", this rank's " + shape_str(r.lhs_local) + ")");
  }
  // A pre-quantized operand is read where the caller holds it: no quantized copy.
  const size_t lhs_elems = q.lhs_quantized ? 0 : static_cast<size_t>(p.lhs_rows * p.k);
  const size_t rhs_elems = q.rhs_quantized ? 0 : static_cast<size_t>(p.n * p.k);
  p.lhs_at = 0;
  p.rhs_at = align_up(lhs_elems);
  size_t at = align_up(p.rhs_at + rhs_elems);
  if (block > 0) {
    p.lhs_block_at = at;
    p.rhs_block_at = align_up(at + lhs_elems / static_cast<size_t>(block));
    at = align_up(p.rhs_block_at + rhs_elems / static_cast<size_t>(block));
  }
  p.amax_at = at;
  p.quant_bytes = static_cast<int64_t>(at + 2 * sizeof(float));

  const int history = p.rule == ScaleRule::kDelayed ? q.recipe.amax_history_len : 0;
  const int64_t state_floats = ScaleStateLayout::floats(history);
  p.rhs_state_at = static_cast<size_t>(state_floats) * sizeof(float);
  p.scales_init.assign(static_cast<size_t>(2 * state_floats), 0.0f);
  for (int64_t base : {int64_t{0}, state_floats}) {
    p.scales_init[static_cast<size_t>(base + ScaleStateLayout::kScale)] = 1.0f;
    p.scales_init[static_cast<size_t>(base + ScaleStateLayout::kScaleInv)] = 1.0f;
  }

  if (q.lhs_quantized && q.rhs_quantized) {  // nothing to quantize: no workspace, no state
    p.quant_bytes = 0;
    p.scales_init.clear();
  }

  // The geometry now describes the GEMM on the quantized copies. A transposed lhs
  // [K..., M...] has its copy [M..., K]: the collectives' chunks and reorders read that.
  if (g.lhs_transposed && !q.lhs_quantized) {
    const auto contracting = static_cast<std::ptrdiff_t>(d.contracting_dims.first.size());
    Shape copy(g.lhs_local.begin() + contracting, g.lhs_local.end());
    copy.push_back(g.k);
    g.lhs_local = copy;
  }
  g.in = p.desc.lhs_format;
  g.rhs_in = p.desc.rhs_format;
  g.lhs_transposed = false;
  g.rhs_transposed = true;
  g.ldb = p.k;
  g.lhs_src = q.lhs_quantized ? Ref{Operand::kLhs} : Ref{Workspace::kQuant, p.lhs_at};
  g.rhs_src = q.rhs_quantized ? Ref{Operand::kRhs} : Ref{Workspace::kQuant, p.rhs_at};
  g.fast_accumulation = !fp8_gemm_high_precision_accumulation();
  if (row.tensor_scale_dtype != ScaleDType::kNone) {
    g.scales.lhs_scale_inv =
        q.lhs_quantized ? Ref{Operand::kLhsScaleInv}
                        : Ref{Workspace::kScales, ScaleStateLayout::kScaleInv * sizeof(float)};
    g.scales.rhs_scale_inv =
        q.rhs_quantized
            ? Ref{Operand::kRhsScaleInv}
            : Ref{Workspace::kScales, p.rhs_state_at + ScaleStateLayout::kScaleInv * sizeof(float)};
  }
  g.block_scaling = p.scaling;
  if (block > 0) {
    g.lhs_block = block;
    g.scales.lhs_block = Ref{Workspace::kQuant, p.lhs_block_at};
    g.scales.rhs_block = Ref{Workspace::kQuant, p.rhs_block_at};
  }
  if (p.scaling == BlockScaling::kMxfp8 && g.collective == CollectiveOp::kAllGather) {
    // gemm.py gathers the lhs scale with the lhs (its sequence spec set to None, 1003-1006).
    g.lhs_side_band.push_back({"lhs scale_inv", *g.scales.lhs_block,
                               lhs_elems / static_cast<size_t>(block), true, block});
  }
  return p;
}

namespace {

Ref amax_ref(const QuantizationPlan& p, int operand) {
  return {Workspace::kQuant, p.amax_at + static_cast<size_t>(operand) * sizeof(float)};
}
Ref state_ref(const QuantizationPlan& p, int operand) {
  return {Workspace::kScales, operand == 0 ? 0 : p.rhs_state_at};
}

// Whether the plan quantizes operand `o` (0 the lhs, 1 the rhs): not a pre-quantized one.
bool quantizes(const QuantizationPlan& p, int o) {
  return !(o == 0 ? p.desc.lhs_quantized : p.desc.rhs_quantized);
}

// Whether the casts measure the amaxes (QuantizeOp::amax): delayed scaling's, which quantize
// with earlier calls' scales and only record this call's amax; the other modes need the amax
// before they cast.
bool casts_measure_amax(const QuantizationPlan& p) { return p.rule == ScaleRule::kDelayed; }

// Amaxes of the operands the plan quantizes (unless their casts measured them), their max over
// the job, and each one's scale from it (the amaxes lie side by side, lhs first, so one
// reduction takes both).
void add_scale_ops(std::vector<Op>& ops, const QuantizationPlan& p, const std::string& name) {
  const bool casts_measure = casts_measure_amax(p);
  const int first = quantizes(p, 0) ? 0 : 1;
  const int count = static_cast<int>(quantizes(p, 0)) + static_cast<int>(quantizes(p, 1));
  if (count == 0) return;
  if (quantizes(p, 0) && !casts_measure) {
    ops.push_back(AmaxOp{{Operand::kLhs}, p.src, p.lhs_rows * p.k, amax_ref(p, 0), 0});
  }
  if (quantizes(p, 1) && !casts_measure) {
    ops.push_back(AmaxOp{{Operand::kRhs}, p.src, p.k * p.n, amax_ref(p, 1), 0});
  }
  ops.push_back(AmaxReduceOp{amax_ref(p, first), count, 0, name + " amax max over the job"});
  for (int o = first; o < 2; ++o) {
    if (!quantizes(p, o)) continue;
    ScaleUpdate u;
    u.rule = p.rule;
    u.recipe = p.desc.recipe;
    u.fp8_max = numeric::fp8_max(o == 0 ? p.desc.lhs_format : p.desc.rhs_format);
    ops.push_back(ScaleOp{u, state_ref(p, o), amax_ref(p, o), 0});
  }
}

void add_quantize_ops(std::vector<Op>& ops, const QuantizationPlan& p, const std::string& name) {
  const bool measure_amax = casts_measure_amax(p);
  QuantizeTask lhs;
  lhs.src_dtype = p.src;
  lhs.format = p.desc.lhs_format;
  lhs.scaling = p.scaling;
  QuantizeTask rhs = lhs;
  // The lhs as the caller holds it: [M, K], or [K, M] to transpose (TE's colwise copy).
  lhs.rows = p.lhs_source_transposed ? p.k : p.lhs_rows;
  lhs.cols = p.lhs_source_transposed ? p.lhs_rows : p.k;
  lhs.transpose = p.lhs_source_transposed;
  rhs.format = p.desc.rhs_format;
  // The rhs as the caller holds it: [N, K] already, or [K, N] to transpose.
  rhs.rows = p.rhs_source_transposed ? p.n : p.k;
  rhs.cols = p.rhs_source_transposed ? p.k : p.n;
  rhs.transpose = !p.rhs_source_transposed;
  rhs.two_d = scaling_mode_row(p.desc.mode).two_d;
  const bool blocks = p.scaling != BlockScaling::kTensor;
  if (quantizes(p, 0)) {
    ops.push_back(QuantizeOp{
        lhs,
        {Operand::kLhs},
        {Workspace::kQuant, p.lhs_at},
        state_ref(p, 0),
        blocks ? std::optional<Ref>(Ref{Workspace::kQuant, p.lhs_block_at}) : std::nullopt,
        0,
        name + " quantize lhs",
        measure_amax ? std::optional<Ref>(amax_ref(p, 0)) : std::nullopt});
  }
  if (!quantizes(p, 1)) return;
  ops.push_back(
      QuantizeOp{rhs,
                 {Operand::kRhs},
                 {Workspace::kQuant, p.rhs_at},
                 state_ref(p, 1),
                 blocks ? std::optional<Ref>(Ref{Workspace::kQuant, p.rhs_block_at}) : std::nullopt,
                 0,
                 name + " quantize rhs",
                 measure_amax ? std::optional<Ref>(amax_ref(p, 1)) : std::nullopt});
}

}  // namespace

void add_quantization(CollectiveGemm& c, const QuantizationPlan& q, const std::string& name) {
  std::vector<Op> before, after;
  // Delayed scaling quantizes with the scales of earlier calls, its casts measuring this call's
  // amaxes as they read the sources (no second read), and reduces them and updates the scales
  // after the GEMMs, off their critical path; the other modes need this call's amax first.
  if (q.rule == ScaleRule::kDelayed) {
    add_quantize_ops(before, q, name);
    add_scale_ops(after, q, name);
  } else {
    if (scaling_mode_row(q.desc.mode).amax) add_scale_ops(before, q, name);
    add_quantize_ops(before, q, name);
  }
  std::vector<Program*> all{&c.overlapped, &c.sequential, &c.gemm_only, &c.collective_only};
  // The paths that hand out the gathered lhs exist only where the lhs is the caller's own
  // (pre-quantized) bytes; they quantize the rhs as the plain paths do.
  std::vector<Program*> calls{&c.overlapped, &c.sequential};
  for (std::optional<Program>* p : {&c.overlapped_gathering, &c.sequential_gathering}) {
    if (*p) {
      all.push_back(&**p);
      calls.push_back(&**p);
    }
  }
  for (Program* p : all) {
    p->workspace.quant = q.quant_bytes;
    p->workspace.scales = static_cast<int64_t>(q.scales_init.size() * sizeof(float));
    p->scales_init = q.scales_init;
  }
  // The benchmark's parts time the GEMM and the collective alone, on quantized data already.
  for (Program* p : calls) {
    p->ops.insert(p->ops.begin(), before.begin(), before.end());
    p->ops.insert(p->ops.end(), after.begin(), after.end());
  }
}

}  // namespace cgemm
