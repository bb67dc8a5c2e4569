// GroupedGemmPlan (cgemm/runtime/grouped_plan.hpp): the planner's grouped_gemm on the desc,
// the layouts the runtime runs, and the call as a Program run by the engine.
//
// A Program (runtime/src/program/program.hpp) although the groups' sizes and every offset into lhs,
// rhs and out change per call: what is fixed at planning is the call's shape (GroupedGemmShape: the
// ragged extent, K, N, layouts, dtypes, path), and one op hands it to the backend with this
// call's sizes, which compute the groups' offsets there (Backend::grouped_gemm). So the plan
// gets what GemmPlan has from the engine: workspaces and the backend's per-path state (the CUDA
// runners' handles, staging and workspace) made once when the plan is made, the caller's
// stream, the golden programs' recording, and the host round trip of sizes in backend memory as
// an op of its own (GroupSizesToHostOp), which a CUDA-graph capture refuses by name.

#include "cgemm/runtime/grouped_plan.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "cgemm/core/env.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/context.hpp"
#include "grouped_rows.hpp"
#include "program/engine.hpp"

namespace cgemm {

namespace {

bool runs_dtype(DType t) {
  return t == DType::kBFloat16 || t == DType::kFloat16 || t == DType::kFloat32;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

// Where gemm.py carries the group sizes of an operand whose ragged dim is `ragged_dim`:
// first_dims when it is dim 0, last_dims otherwise (the planner reads only the lengths).
void set_ragged(GroupedOperand& op, int64_t ragged_dim, int64_t groups) {
  if (ragged_dim == 0) {
    op.first_dims_size = groups;
  } else {
    op.last_dims_size = groups;
  }
}

// The planner's input for `d`: no_scale operands, the sizes on the operands gemm.py's MoE
// layers put them on (docs/GROUPED_GEMM.md), no group_offset, no v2 library.
GroupedGemmInput planner_input(const GroupedGemmDesc& d, const Backend& be) {
  GroupedGemmInput in;
  in.lhs.original_shape = d.lhs_shape;
  in.lhs.dtype = d.dtype;
  in.rhs.original_shape = d.rhs_shape;
  in.rhs.dtype = d.rhs_dtype.value_or(d.dtype);
  if (is_fp8(d.dtype)) {
    // GroupedScaledTensor1x operands: a scale_inv per group, the data as laid out ("N" lhs,
    // "T" rhs: no transposed copy), dequantized to the output dtype.
    for (GroupedOperand* op : {&in.lhs, &in.rhs}) {
      op->scaled = true;
      op->scaling_mode = d.scaling;
      op->dq_dtype = d.preferred_element_type.value_or(DType::kBFloat16);
      op->layout_is_t = false;
      op->scale_inv_size = d.num_groups;
    }
  }
  in.lhs_contracting_dims = d.lhs_contracting_dims;
  in.rhs_contracting_dims = d.rhs_contracting_dims;
  const auto lhs_ndim = static_cast<int64_t>(d.lhs_shape.size());
  const auto& lcd = d.lhs_contracting_dims;
  const auto& rcd = d.rhs_contracting_dims;
  if (d.form == GroupedForm::kRaggedRows) {
    // The rows are lhs's non-contracting dim: dim 0 unless lhs is transposed ([K, M]), as
    // gemm.py's lhs_is_trans = cd[-1] != ndim - 1.
    const bool lhs_trans = !lcd.empty() && lcd.back() != lhs_ndim - 1;
    set_ragged(in.lhs, lhs_trans ? 1 : 0, d.num_groups);
  } else {
    set_ragged(in.lhs, lcd.empty() ? 0 : lcd.front(), d.num_groups);
    set_ragged(in.rhs, rcd.empty() ? 0 : rcd.front(), d.num_groups);
  }
  in.bias_shape = d.bias_shape;
  in.preferred_element_type = d.preferred_element_type;
  in.compute_capability = be.compute_capability();
  in.num_compute_streams = be.num_streams();
  in.v2_available = false;  // cgemm has no nvte_grouped_gemm
  // Read as gemm.py reads it (once per grouped_gemm call there, per plan here): "1" fails the
  // plan with gemm.py's message, since no v2 kernel is available.
  // getenv itself, not env_text: an empty value fails as gemm.py's int("") does.
  if (const char* v = std::getenv(env::kEnforceV2GroupedGemm.name.data()); v != nullptr) {
    in.enforce_v2_env = std::string(v);
  }
  return in;
}

// One FP8 scale_inv value per slot, at cuBLASLt's alignment for scale pointers.
constexpr int64_t kScaleSlotBytes = 16;

// The plan's two programs, which differ only in where the grouped GEMM op finds the host copy
// of the sizes: the host workspace, filled by the op before from backend memory, or the
// caller's host slot.
template <class Impl>
void write_programs(Impl& im, const GroupedGemmShape& shape, const std::string& name) {
  const auto groups = static_cast<size_t>(shape.groups);
  GroupedGemmOp gemm;
  gemm.shape = shape;
  gemm.lhs = {Operand::kLhs};
  gemm.rhs = {Operand::kRhs};
  gemm.out = {Operand::kOut};
  if (shape.bias) gemm.bias = Ref{Operand::kBias};
  gemm.label = name;
  for (size_t g = 0; g < groups; ++g) {
    gemm.group_labels.push_back(name + " group " + std::to_string(g));
  }
  std::vector<Op> scale_copies;
  WorkspaceSizes ws;
  if (shape.scaled) {
    // cuBLASLt refuses a scale pointer that is not 16-byte aligned (CUBLAS_STATUS_NOT_SUPPORTED
    // from cublasLtMatmul on the H200, cuBLASLt 13.1), and group g's value of a [G] array is at
    // 4g bytes: every value gets a slot of its own first, on stream 0 as the GEMMs that read it.
    const size_t rhs_at = groups * kScaleSlotBytes;
    for (const auto& [slot, at, label] :
         {std::tuple{Operand::kLhsScaleInv, size_t{0}, "lhs_scale_inv to its slot"},
          std::tuple{Operand::kRhsScaleInv, rhs_at, "rhs_scale_inv to its slot"}}) {
      CopyOp c;
      c.src = {slot};
      c.dst = {Workspace::kQuant, at};
      c.bytes = sizeof(float);
      c.count = shape.groups;
      c.src_stride = sizeof(float);
      c.dst_stride = kScaleSlotBytes;
      c.label = label;
      scale_copies.push_back(c);
    }
    gemm.lhs_scale_inv = Ref{Workspace::kQuant, 0};
    gemm.rhs_scale_inv = Ref{Workspace::kQuant, rhs_at};
    gemm.scale_stride = kScaleSlotBytes;
    ws.quant = static_cast<int64_t>(2 * rhs_at);
  }
  // Sizes in backend memory: read there (shape.device_sizes), or copied to the host workspace
  // (one copy per call, never one per group) and given to the backend in both places.
  Program& b = im.from_backend_sizes;
  if (!shape.device_sizes) {
    b.ops.push_back(GroupSizesToHostOp{
        {Operand::kGroupSizes}, {Workspace::kHost}, shape.groups, name + " group sizes"});
    b.workspace.host = static_cast<int64_t>(groups * sizeof(int32_t));
  }
  b.ops.insert(b.ops.end(), scale_copies.begin(), scale_copies.end());
  GroupedGemmOp from_backend = gemm;
  if (!shape.device_sizes) from_backend.host_sizes = Ref{Workspace::kHost};
  from_backend.sizes = Ref{Operand::kGroupSizes};
  b.ops.push_back(std::move(from_backend));
  const int64_t host_bytes = b.workspace.host;
  b.workspace = ws;
  b.workspace.host = host_bytes;

  Program& h = im.from_host_sizes;
  h.ops = std::move(scale_copies);
  gemm.host_sizes = Ref{Operand::kHostGroupSizes};
  h.ops.push_back(std::move(gemm));
  h.workspace = ws;
  for (const Program* p : {&b, &h}) p->check_writes(name);
}

// An operand collapsed at gemm.py's axis boundary: its contracting dims (consecutive, at
// either end of dims [first, ndim)) flattened into k, the rest (from `first`) into other.
struct Collapsed {
  bool k_first = false;  // the contracting dims lead (gemm.py's is_trans for an lhs)
  int64_t k = 1, other = 1;
  Shape kept;  // the non-contracting dims from `first`, as the output holds them
};

std::optional<Collapsed> collapse_at_boundary(const Shape& s, std::vector<int64_t> dims,
                                              size_t first) {
  const auto nd = static_cast<int64_t>(s.size());
  if (dims.empty()) return std::nullopt;
  for (int64_t& v : dims) v = v < 0 ? v + nd : v;
  std::sort(dims.begin(), dims.end());
  const auto lo = dims.front(), hi = dims.back();
  if (lo < static_cast<int64_t>(first) || hi >= nd) return std::nullopt;
  if (hi - lo + 1 != static_cast<int64_t>(dims.size())) return std::nullopt;  // not consecutive
  Collapsed c;
  c.k_first = lo == static_cast<int64_t>(first) && hi != nd - 1;
  if (!c.k_first && hi != nd - 1) return std::nullopt;  // in the middle
  for (int64_t i = static_cast<int64_t>(first); i < nd; ++i) {
    const int64_t v = s[static_cast<size_t>(i)];
    if (i >= lo && i <= hi) {
      c.k *= v;
    } else {
      c.other *= v;
      c.kept.push_back(v);
    }
  }
  if (c.kept.empty()) return std::nullopt;
  return c;
}

}  // namespace

// The plan's programs and the engine that runs them, at a fixed address (the plan moves).
struct GroupedGemmPlan::Impl {
  explicit Impl(Backend& be) : engine(be, 0) {}
  Program from_backend_sizes;  // the sizes in backend memory: copied to the host first
  Program from_host_sizes;     // the sizes in host memory
  Engine engine;
};

GroupedGemmPlan::~GroupedGemmPlan() = default;
GroupedGemmPlan::GroupedGemmPlan(GroupedGemmPlan&&) noexcept = default;

GroupedGemmPlan::GroupedGemmPlan(Context& ctx, GroupedGemmDesc desc)
    : GroupedGemmPlan(ctx.backend(), std::move(desc)) {}

GroupedGemmPlan::GroupedGemmPlan(Backend& backend, GroupedGemmDesc desc)
    : be_(backend), desc_(std::move(desc)) {
  const GroupedGemmDesc& d = desc_;
  const std::string what = "grouped GEMM '" + d.name + "' (" + grouped_form_name(d.form) + ")";
  if (d.num_groups < 0) {
    throw Error(what + ": num_groups " + std::to_string(d.num_groups) + " is negative");
  }
  // gemm.py's rules and errors first (num_groups 0 is its "at least one non-empty dimension
  // array" error).
  planned_ = grouped_gemm(planner_input(d, be_));

  // What the runtime runs.
  const bool fp8 = is_fp8(d.dtype);
  if (fp8) {
    const DType rhs_t = d.rhs_dtype.value_or(d.dtype);
    if (!is_fp8(rhs_t)) {
      throw Error(what + ": lhs is " + std::string(dtype_name(d.dtype)) + " but rhs is " +
                  std::string(dtype_name(rhs_t)) + "; an FP8 grouped GEMM takes FP8 on both sides");
    }
    if (!is_tensor_scaling(d.scaling)) {
      throw Error(what + ": FP8 inputs with scaling " + std::string(scaling_mode_name(d.scaling)) +
                  " are not run; use delayed_tensor_scaling or current_tensor_scaling (a "
                  "scale_inv per group)");
    }
  } else if (d.rhs_dtype && *d.rhs_dtype != d.dtype) {
    throw Error(what + ": rhs_dtype " + std::string(dtype_name(*d.rhs_dtype)) +
                " differs from dtype " + std::string(dtype_name(d.dtype)) +
                " (only FP8 operands may differ)");
  } else if (d.scaling != ScalingMode::kNoScaling) {
    throw Error(what + ": scaling " + std::string(scaling_mode_name(d.scaling)) +
                " needs FP8 inputs (dtype float8_e4m3 or float8_e5m2); quantizing inside the "
                "grouped GEMM is not run");
  }
  if (!fp8 && !runs_dtype(d.dtype)) {
    throw Error(what + ": inputs of dtype " + std::string(dtype_name(d.dtype)) +
                " are not run; use bfloat16, float16, float32 or FP8 with tensor scaling");
  }
  if (!runs_dtype(planned_.out_dtype)) {
    throw Error(what + ": output dtype " + std::string(dtype_name(planned_.out_dtype)) +
                " is not run; use bfloat16, float16 or float32");
  }
  const std::string layout = "lhs " + shape_str(d.lhs_shape) + " contracting " +
                             dims_text(d.lhs_contracting_dims) + ", rhs " + shape_str(d.rhs_shape) +
                             " contracting " + dims_text(d.rhs_contracting_dims);
  const auto refuse = [&](const std::string& why) {
    throw Error(what + ": layout " + layout + " is not run: " + why);
  };
  // Issue 43 item 4: N-D operands collapse at gemm.py's axis boundary (get_lhs_axis_boundary,
  // get_rhs_axis_boundary) into the 2-D (3-D with G) GEMM of the same memory.
  const auto collapse = [&](const Shape& s, const std::vector<int64_t>& dims, size_t first,
                            const char* name) {
    const std::optional<Collapsed> c = collapse_at_boundary(s, dims, first);
    if (!c) {
      refuse(std::string("the ") + name + "'s contracting dims must be consecutive and its " +
             (first == 0 ? "leading or trailing dims" : "leading (after G) or trailing dims") +
             ", with a non-contracting dim besides");
    }
    return *c;
  };
  // The dims pair by list position, as jax.lax.dot_general pairs them, while the collapse
  // contracts them in storage order: the same only when each list is in storage order, of one
  // length and the paired sizes agree (as the dense GEMM's require_paired_contraction).
  const auto& ld = d.lhs_contracting_dims;
  const auto& rd = d.rhs_contracting_dims;
  for (const auto* dims : {&ld, &rd}) {
    for (int64_t v : *dims) {
      if (v < 0)
        refuse("negative contracting dims are not read as gemm.py reads them; count from 0");
    }
    if (!std::is_sorted(dims->begin(), dims->end())) {
      refuse("list each operand's contracting dims in the order they are stored");
    }
  }
  if (ld.size() != rd.size()) refuse("the operands list different numbers of contracting dims");
  for (size_t i = 0; i < ld.size(); ++i) {
    const auto l = static_cast<size_t>(ld[i]), r = static_cast<size_t>(rd[i]);
    if (l < d.lhs_shape.size() && r < d.rhs_shape.size() && d.lhs_shape[l] != d.rhs_shape[r]) {
      refuse("contracting dim " + std::to_string(i) + " has size " +
             std::to_string(d.lhs_shape[l]) + " on the lhs and " + std::to_string(d.rhs_shape[r]) +
             " on the rhs");
    }
  }
  const Collapsed lhs = collapse(d.lhs_shape, d.lhs_contracting_dims, 0, "lhs");
  // GemmTask's lhs [k, m] is gemm.py's lhs_is_trans (its contracting dims lead).
  shape_.lhs_trans = lhs.k_first;
  const int64_t lhs_k = lhs.k, lhs_other = lhs.other;
  Shape expected_out = lhs.kept;
  const bool rows = d.form == GroupedForm::kRaggedRows;
  if (rows) {
    if (d.rhs_shape.size() < 3) refuse("rhs must be [G, K..., N...] or [G, N..., K...]");
    if (d.rhs_shape[0] != d.num_groups) {
      throw Error(what + ": rhs " + shape_str(d.rhs_shape) + " holds " +
                  std::to_string(d.rhs_shape[0]) + " groups in dim 0, the plan has num_groups " +
                  std::to_string(d.num_groups));
    }
  } else if (d.rhs_shape.size() < 2) {
    refuse("rhs must be [K..., N...] or [N..., K...]");
  }
  const Collapsed rhs = collapse(d.rhs_shape, d.rhs_contracting_dims, rows ? 1 : 0, "rhs");
  shape_.rhs_trans = !rhs.k_first;  // [G, N, K] / [N, K]: gemm.py's rhs_is_trans
  shape_.n = rhs.other;
  expected_out.insert(expected_out.end(), rhs.kept.begin(), rhs.kept.end());
  if (rows) {
    shape_.k = lhs_k;
    shape_.extent = lhs_other;  // M
  } else {
    shape_.m = lhs_other;
    shape_.extent = lhs_k;  // K_total
    expected_out.insert(expected_out.begin(), d.num_groups);
  }
  if (fp8 && (shape_.lhs_trans || !shape_.rhs_trans)) {
    refuse(
        "FP8 runs lhs [M, K] and rhs [G, N, K] (ragged rows) or [N, K] (ragged contracting) "
        "only (gemm.py's lhs \"N\" / rhs \"T\" scaled data below compute capability 100, "
        "cuBLASLt's FP8 layout)");
  }
  // What gemm.py binds (the planner's lhs_is_trans / rhs_is_trans) is what runs.
  if (shape_.lhs_trans != planned_.lhs_is_trans || shape_.rhs_trans != planned_.rhs_is_trans) {
    refuse("gemm.py reads it as lhs_is_trans " + std::to_string(planned_.lhs_is_trans) +
           ", rhs_is_trans " + std::to_string(planned_.rhs_is_trans));
  }
  // The planner's output shape is gemm.py's; the runtime's geometry must agree with it.
  if (planned_.out_shape != expected_out) {
    throw Error(what + ": the planner's output shape " + shape_str(planned_.out_shape) +
                " is not the " + shape_str(expected_out) + " the runtime computes for " + layout);
  }
  if (fp8) {
    // cuBLASLt's FP8 rule (as quantization.cpp's check_fp8_alignment for the dense GEMMs):
    // operands and leading dims on 16 bytes, refused on every backend so that no GPU meets it
    // after the first groups of a call ran. The K-major rows hold K (ragged rows) or K_total
    // (ragged contracting) FP8 bytes; the output rows N elements of the output dtype.
    const int64_t k_row = d.form == GroupedForm::kRaggedRows ? shape_.k : shape_.extent;
    const int64_t out_row = shape_.n * static_cast<int64_t>(dtype_size(planned_.out_dtype));
    if (k_row % 16 != 0 || out_row % 16 != 0) {
      throw Error(what + ": FP8 GEMMs need 16-byte aligned rows (cuBLASLt's rule), but " +
                  (k_row % 16 != 0 ? "the FP8 rows hold " + std::to_string(k_row) +
                                         " contracting bytes (make K a multiple of 16)"
                                   : "the output rows hold " + std::to_string(out_row) +
                                         " bytes (N " + std::to_string(shape_.n) + " of " +
                                         std::string(dtype_name(planned_.out_dtype)) + ")"));
    }
  }
  (void)num_elements(d.lhs_shape);  // checked products: every offset below fits in int64
  (void)num_elements(d.rhs_shape);
  (void)num_elements(expected_out);
  shape_.form = d.form;
  shape_.groups = d.num_groups;
  shape_.in_dtype = d.dtype;
  shape_.rhs_dtype = d.rhs_dtype.value_or(d.dtype);
  shape_.out_dtype = planned_.out_dtype;
  shape_.bias = planned_.has_bias;
  shape_.scaled = fp8;
  shape_.fast_accumulation = !fp8_gemm_high_precision_accumulation();
  choose_path(what);
  impl_ = std::make_unique<Impl>(be_);
  write_programs(*impl_, shape_, d.name);
  const std::array<const Program*, 2> programs{&impl_->from_backend_sizes, &impl_->from_host_sizes};
  impl_->engine.prepare(programs);
}

void GroupedGemmPlan::choose_path(const std::string& what) {
  const GroupedGemmDesc& d = desc_;
  shape_.path = GroupedPath::kLoop;
  std::string why;  // why no CUDA runner takes the plan
  if (d.form != GroupedForm::kRaggedRows) {
    why = "it runs the ragged-rows form (forward, dgrad) only";
  }  // the dtypes each runner takes: grouped_rows.hpp's refusals
  const auto refuse = [&](const std::string& reason) {
    throw Error(what + ": path " + grouped_path_name(d.path) + " does not run it: " + reason +
                "; use path loop (or auto)");
  };
  // Sizes read in backend memory: refused by the same rules on every backend, so a plan the
  // CPU backend takes (and CI tests) is one the CUDA backend runs. Kept for capture's advice.
  device_tiles_refusal_ =
      why.empty() ? grouped::cublaslt_device_tiles_refusal(grouped::ragged_rows_geometry(shape_))
                  : why;
  if (d.path == GroupedPath::kCublasLtDeviceTiles) {
    if (!device_tiles_refusal_.empty()) refuse(device_tiles_refusal_);
    shape_.device_sizes = true;
    if (be_.kind() == BackendKind::kCuda) shape_.path = GroupedPath::kCublasLtDeviceTiles;
    return;
  }
  // The CPU backend has one way to run a call.
  if (be_.kind() != BackendKind::kCuda || d.path == GroupedPath::kLoop) return;
  const grouped::RaggedRowsGeometry g = grouped::ragged_rows_geometry(shape_);
  const std::string tiles_why = why.empty() ? grouped::cublaslt_tiles_refusal(g) : why;
  const std::string grouped_why = why.empty() ? grouped::cublas_grouped_refusal(g) : why;
  if (d.path == GroupedPath::kCublasGrouped) {
    if (!grouped_why.empty()) refuse(grouped_why);
    shape_.path = GroupedPath::kCublasGrouped;
  } else if (d.path == GroupedPath::kCublasLtTiles) {
    if (!tiles_why.empty()) refuse(tiles_why);
    shape_.path = GroupedPath::kCublasLtTiles;
  } else if (tiles_why.empty() && !shape_.scaled &&
             shape_.extent < kAutoTilesRowsPerGroup * d.num_groups) {
    // kAuto: see kAutoTilesRowsPerGroup (a rule not measured on a GPU yet). FP8 stays on the
    // loop: cuBLASLt 13.1 on an H100 has no algorithm for its tiles (the alpha vector,
    // tile_scales.hpp; NOT_SUPPORTED, 2026-12-07).
    shape_.path = GroupedPath::kCublasLtTiles;
  }
}

int64_t GroupedGemmPlan::check_group_sizes(std::span<const int32_t> group_sizes) const {
  return cgemm::check_group_sizes(shape_, desc_.name, group_sizes);
}

double GroupedGemmPlan::flops(std::span<const int32_t> group_sizes) const {
  check_group_sizes(group_sizes);
  double f = 0.0;
  for (int32_t s : group_sizes) {
    f += desc_.form == GroupedForm::kRaggedRows
             ? 2.0 * s * static_cast<double>(shape_.n * shape_.k)
             : 2.0 * static_cast<double>(shape_.m * shape_.n) * s;
  }
  return f;
}

std::string GroupedGemmPlan::capture_refusal(bool sizes_in_backend_memory) const {
  const Impl& im = *impl_;
  const std::string why = cgemm::capture_refusal(
      sizes_in_backend_memory ? im.from_backend_sizes : im.from_host_sizes, be_.capture_refusal());
  return why;
}

int64_t GroupedGemmPlan::loop_fallbacks() const { return impl_->engine.grouped_loop_fallbacks(); }

void GroupedGemmPlan::check_device_sizes() {
  if (!shape_.device_sizes) return;
  be_.synchronize();
  be_.check_grouped_gemm(impl_->engine.grouped_handle(shape_));
}

const int32_t* GroupedGemmPlan::sized(std::span<const int32_t> group_sizes) const {
  if (static_cast<int64_t>(group_sizes.size()) != desc_.num_groups) {
    check_group_sizes(group_sizes);  // throws its message for the count
  }
  return group_sizes.data();
}

Operands GroupedGemmPlan::scaled(Operands x, const int32_t* host_sizes, const float* lhs_scale_inv,
                                 const float* rhs_scale_inv) {
  x.set_input(Operand::kHostGroupSizes, host_sizes);
  x.set_input(Operand::kLhsScaleInv, lhs_scale_inv);
  x.set_input(Operand::kRhsScaleInv, rhs_scale_inv);
  return x;
}

// Every refusal with its message from before the plan ran through the engine, in that order:
// the call for the plan's dtype, its scale_invs, the buffers, then the sizes (by the engine).
void GroupedGemmPlan::check_call(const Operands& x) const {
  const std::string what = "grouped GEMM '" + desc_.name + "'";
  const bool lhs_s = x.has(Operand::kLhsScaleInv), rhs_s = x.has(Operand::kRhsScaleInv);
  if (shape_.scaled) {
    if (!lhs_s && !rhs_s)
      throw Error(what + " has FP8 inputs: call execute_scaled with their scale_inv");
    if (!lhs_s || !rhs_s) {
      throw Error(what + ": " + (!lhs_s ? "lhs" : "rhs") +
                  "_scale_inv is null (an FP8 call needs G float32 values for each operand)");
    }
  } else if (lhs_s || rhs_s) {
    throw Error(what + " has " + std::string(dtype_name(desc_.dtype)) +
                " inputs: execute_scaled is for FP8 plans, call execute");
  }
  const Operand missing[] = {Operand::kLhs, Operand::kRhs, Operand::kOut};
  for (Operand o : missing) {
    if (!x.has(o)) throw Error(what + ": " + std::string(Operands::name(o)) + " is null");
  }
  if (planned_.has_bias && !x.has(Operand::kBias)) {
    throw Error(what + " was planned with a bias but got none");
  }
  if (!planned_.has_bias && x.has(Operand::kBias)) {
    throw Error(what + " was planned without a bias but got one");
  }
  if (x.has(Operand::kGatheredLhs)) {
    throw Error(what + ": a grouped GEMM gathers no lhs; gathered_lhs must be null");
  }
  // The device tiles compute every pointer on the device, from bases that must be on 16
  // bytes (they cannot hand the call to the loop): refused on every backend alike.
  if (shape_.device_sizes && !grouped::bases_and_lds_aligned16(
                                 grouped::ragged_rows_geometry(shape_), x.input(Operand::kLhs),
                                 x.input(Operand::kRhs), x.input(Operand::kOut))) {
    throw Error(what +
                ": lhs, rhs and out must start on 16 bytes (path cublaslt_device_tiles "
                "computes every group's pointers from them on the device)");
  }
  const bool backend = x.has(Operand::kGroupSizes), host = x.has(Operand::kHostGroupSizes);
  if (!backend && !host) throw Error(what + ": the group sizes pointer is null");
  if (backend && host) {
    throw Error(what +
                ": group sizes given twice (group_sizes in backend memory and "
                "host_group_sizes in host memory); give one");
  }
}

void GroupedGemmPlan::execute(const Operands& x, void* stream) {
  check_call(x);
  // Sizes in host memory are checked before anything is issued (the caller's stream's event
  // and the FP8 scale slots' copies included); those in backend memory by the engine, once
  // their copy has brought them to the host.
  if (x.has(Operand::kHostGroupSizes)) {
    check_group_sizes({static_cast<const int32_t*>(x.input(Operand::kHostGroupSizes)),
                       static_cast<size_t>(desc_.num_groups)});
  }
  const Impl& im = *impl_;
  impl_->engine.run_on(x.has(Operand::kGroupSizes) ? im.from_backend_sizes : im.from_host_sizes, x,
                       stream, "grouped GEMM '" + desc_.name + "'");
}

CapturedCall GroupedGemmPlan::capture(const Operands& x, void* stream) {
  check_call(x);
  if (x.has(Operand::kHostGroupSizes)) {  // as execute checks them
    check_group_sizes({static_cast<const int32_t*>(x.input(Operand::kHostGroupSizes)),
                       static_cast<size_t>(desc_.num_groups)});
  }
  // Refused here first, with what would make it capturable where the sizes are the reason
  // (the engine's own check names the op only).
  const bool backend_sizes = x.has(Operand::kGroupSizes);
  std::string why = capture_refusal(backend_sizes);
  if (!why.empty()) {
    if (!shape_.device_sizes && device_tiles_refusal_.empty()) {
      why += " (path " + std::string(grouped_path_name(shape_.path)) +
             "; this plan with path cublaslt_device_tiles, given its sizes in backend memory, "
             "would read them there and could be captured)";
    } else if (shape_.device_sizes && !backend_sizes) {
      why += " (give the sizes in backend memory: a replay reads them there)";
    }
    throw Error("grouped GEMM '" + desc_.name + "' cannot be captured into a CUDA graph: " + why);
  }
  if (stream == nullptr) stream = be_.native_stream();
  const Impl& im = *impl_;
  const int64_t id = impl_->engine.capture(
      x.has(Operand::kGroupSizes) ? im.from_backend_sizes : im.from_host_sizes, x, stream,
      "grouped GEMM '" + desc_.name + "'");
  return CapturedCall(be_, id, stream, impl_->engine.grouped_handle(shape_));
}

}  // namespace cgemm
