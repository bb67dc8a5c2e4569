// GroupedGemmPlan (cgemm/runtime/grouped_plan.hpp): the planner's grouped_gemm on the desc,
// the layouts the runtime runs, and one call as a loop of Backend::gemm, one per group.
//
// Not a Program (runtime/src/program.hpp): a program is a list of ops with byte offsets fixed
// at planning, the same on every call. Here which groups run, their sizes and every offset
// into lhs, rhs and out change per call, and with sizes in backend memory they are known only
// after the call's one copy to the host; an op for it would be a program generator inside
// the engine, not an operation. The plan needs no workspace and no collective either.

#include "cgemm/runtime/grouped_plan.hpp"

#include <string>
#include <utility>

#include "cgemm/core/error.hpp"
#include "cgemm/runtime/context.hpp"
#include "ragged_rows_runner.hpp"

namespace cgemm {

namespace {

// One FP8 scale_inv value per slot, at cuBLASLt's alignment for scale pointers.
constexpr int64_t kScaleSlotBytes = 16;

bool runs_dtype(DType t) {
  return t == DType::kBFloat16 || t == DType::kFloat16 || t == DType::kFloat32;
}

std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

// Where gemm.py carries the group sizes of a 2-D operand whose ragged dim is `ragged_dim`:
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
  return in;
}

}  // namespace

const char* grouped_form_name(GroupedForm f) {
  return f == GroupedForm::kRaggedRows ? "ragged_rows" : "ragged_contracting";
}

const char* grouped_path_name(GroupedPath p) {
  switch (p) {
    case GroupedPath::kLoop:
      return "loop";
    case GroupedPath::kCublasGrouped:
      return "cublas_grouped";
    case GroupedPath::kCublasLtTiles:
      return "cublaslt_tiles";
    case GroupedPath::kAuto:
      break;
  }
  return "auto";
}

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
  if (d.lhs_shape.size() != 2) refuse("lhs must be 2-D");
  if (d.lhs_contracting_dims.size() != 1 || d.rhs_contracting_dims.size() != 1) {
    refuse("one contracting dim per operand");
  }
  const int64_t lcd = d.lhs_contracting_dims[0];
  const int64_t rcd = d.rhs_contracting_dims[0];
  if (lcd != 0 && lcd != 1) refuse("the lhs contracting dim must be 0 or 1");
  // GemmTask's lhs [k, m] is gemm.py's lhs_is_trans (its contracting dim is not the last).
  lhs_trans_ = lcd == 0;
  const int64_t lhs_k = d.lhs_shape[static_cast<size_t>(lcd)];
  const int64_t lhs_other = d.lhs_shape[static_cast<size_t>(1 - lcd)];
  int64_t rhs_k = 0;
  Shape expected_out;
  if (d.form == GroupedForm::kRaggedRows) {
    if (d.rhs_shape.size() != 3) refuse("rhs must be 3-D, [G, K, N] or [G, N, K]");
    if (rcd != 1 && rcd != 2) refuse("the rhs contracting dim must be 1 or 2 (dim 0 is G)");
    if (d.rhs_shape[0] != d.num_groups) {
      throw Error(what + ": rhs " + shape_str(d.rhs_shape) + " holds " +
                  std::to_string(d.rhs_shape[0]) + " groups in dim 0, the plan has num_groups " +
                  std::to_string(d.num_groups));
    }
    rhs_trans_ = rcd == 2;  // [G, N, K]: gemm.py's rhs_is_trans (K is rhs's last dim)
    rhs_k = d.rhs_shape[static_cast<size_t>(rcd)];
    n_ = d.rhs_shape[static_cast<size_t>(3 - rcd)];
    k_ = lhs_k;
    ragged_ = lhs_other;  // M
    expected_out = {ragged_, n_};
  } else {
    if (d.rhs_shape.size() != 2) refuse("rhs must be 2-D, [K, N] or [N, K]");
    if (rcd != 0 && rcd != 1) refuse("the rhs contracting dim must be 0 or 1");
    rhs_trans_ = rcd == 1;  // [N, K]
    rhs_k = d.rhs_shape[static_cast<size_t>(rcd)];
    n_ = d.rhs_shape[static_cast<size_t>(1 - rcd)];
    m_ = lhs_other;
    ragged_ = lhs_k;  // K_total
    expected_out = {d.num_groups, m_, n_};
  }
  if (fp8 && (d.form != GroupedForm::kRaggedRows || lhs_trans_ || !rhs_trans_)) {
    refuse(
        "FP8 runs the ragged-rows form with lhs [M, K] and rhs [G, N, K] only (gemm.py's lhs "
        "\"N\" / rhs \"T\" scaled data below compute capability 100, cuBLASLt's FP8 layout)");
  }
  if (lhs_k != rhs_k) {
    throw Error(what + ": the contracting sizes differ: lhs " + shape_str(d.lhs_shape) +
                " has K = " + std::to_string(lhs_k) + " (dim " + std::to_string(lcd) + "), rhs " +
                shape_str(d.rhs_shape) + " has K = " + std::to_string(rhs_k) + " (dim " +
                std::to_string(rcd) + ")");
  }
  // The planner's output shape is gemm.py's; the runtime's geometry must agree with it.
  if (planned_.out_shape != expected_out) {
    throw Error(what + ": the planner's output shape " + shape_str(planned_.out_shape) +
                " is not the " + shape_str(expected_out) + " the runtime computes for " + layout);
  }
  (void)num_elements(d.lhs_shape);  // checked products: every offset below fits in int64
  (void)num_elements(d.rhs_shape);
  (void)num_elements(expected_out);
  choose_path(what);
  if (fp8 && d.num_groups > 0) {
    scale_slots_ = {be_.allocate(static_cast<size_t>(2 * d.num_groups) * kScaleSlotBytes),
                    grouped::ReleaseToBackend{&be_}};
  }
  labels_.reserve(static_cast<size_t>(d.num_groups));
  for (int64_t g = 0; g < d.num_groups; ++g) {
    labels_.push_back(d.name + " group " + std::to_string(g));
  }
}

void GroupedGemmPlan::choose_path(const std::string& what) {
  const GroupedGemmDesc& d = desc_;
  // The CPU backend has one way to run a call.
  if (be_.kind() != BackendKind::kCuda || d.path == GroupedPath::kLoop) return;
  std::string why;  // why neither CUDA runner takes the plan
  if (d.form != GroupedForm::kRaggedRows) {
    why = "it runs the ragged-rows form (forward, dgrad) only";
  } else if (planned_.out_dtype != d.dtype) {
    why = "the output dtype " + std::string(dtype_name(planned_.out_dtype)) +
          " differs from the inputs' " + std::string(dtype_name(d.dtype));
  }
  grouped::RaggedRowsGeometry g;
  g.groups = d.num_groups;
  g.m_total = ragged_;
  g.n = n_;
  g.k = k_;
  g.lhs_trans = lhs_trans_;
  g.rhs_trans = rhs_trans_;
  g.dtype = d.dtype;
  const std::string tiles_why = why.empty() ? grouped::cublaslt_tiles_refusal(g) : why;
  const std::string grouped_why = why.empty() ? grouped::cublas_grouped_refusal(g) : why;
  const auto refuse = [&](const std::string& reason) {
    throw Error(what + ": path " + grouped_path_name(d.path) + " does not run it: " + reason +
                "; use path loop (or auto)");
  };
  GroupedPath chosen = GroupedPath::kLoop;
  if (d.path == GroupedPath::kCublasGrouped) {
    if (!grouped_why.empty()) refuse(grouped_why);
    chosen = GroupedPath::kCublasGrouped;
  } else if (d.path == GroupedPath::kCublasLtTiles) {
    if (!tiles_why.empty()) refuse(tiles_why);
    chosen = GroupedPath::kCublasLtTiles;
  } else if (tiles_why.empty() && ragged_ < kAutoTilesRowsPerGroup * d.num_groups) {
    // kAuto: see kAutoTilesRowsPerGroup (a rule not measured on a GPU yet).
    chosen = GroupedPath::kCublasLtTiles;
  }
  if (chosen == GroupedPath::kCublasGrouped) {
    runner_ = grouped::make_cublas_grouped(be_, g, d.name);
  } else if (chosen == GroupedPath::kCublasLtTiles) {
    runner_ = grouped::make_cublaslt_tiles(be_, g, planned_.has_bias, d.name);
  }
  path_ = chosen;
}

int64_t GroupedGemmPlan::check_group_sizes(std::span<const int32_t> group_sizes) const {
  const std::string what = "grouped GEMM '" + desc_.name + "'";
  const std::string dim = desc_.form == GroupedForm::kRaggedRows
                              ? "the ragged dim M (lhs rows) = " + std::to_string(ragged_)
                              : "the ragged contracting dim K = " + std::to_string(ragged_);
  if (static_cast<int64_t>(group_sizes.size()) != desc_.num_groups) {
    throw Error(what + ": got " + std::to_string(group_sizes.size()) +
                " group sizes, the plan has num_groups " + std::to_string(desc_.num_groups));
  }
  int64_t sum = 0;
  for (size_t g = 0; g < group_sizes.size(); ++g) {
    if (group_sizes[g] < 0) {
      throw Error(what + ": group " + std::to_string(g) + " has a negative size " +
                  std::to_string(group_sizes[g]));
    }
    sum += group_sizes[g];  // at most 2^31 * G: no overflow
  }
  if (sum != ragged_) {
    throw Error(what + ": the group sizes sum to " + std::to_string(sum) + ", but " + dim +
                " (they must match)");
  }
  return sum;
}

double GroupedGemmPlan::flops(std::span<const int32_t> group_sizes) const {
  check_group_sizes(group_sizes);
  double f = 0.0;
  for (int32_t s : group_sizes) {
    f += desc_.form == GroupedForm::kRaggedRows ? 2.0 * s * static_cast<double>(n_ * k_)
                                                : 2.0 * static_cast<double>(m_ * n_) * s;
  }
  return f;
}

void GroupedGemmPlan::execute_backend_sizes(const int32_t* group_sizes, const void* lhs,
                                            const void* rhs, const void* bias, void* out) {
  if (group_sizes == nullptr) {
    throw Error("grouped GEMM '" + desc_.name + "': the group sizes pointer is null");
  }
  // One copy of the G sizes per call (never one per group).
  host_sizes_.resize(static_cast<size_t>(desc_.num_groups));
  be_.copy_to_host(host_sizes_.data(), group_sizes, host_sizes_.size() * sizeof(int32_t));
  execute(host_sizes_, lhs, rhs, bias, out);
}

void GroupedGemmPlan::check_operands(const void* lhs, const void* rhs, const void* bias,
                                     void* out) const {
  const std::string what = "grouped GEMM '" + desc_.name + "'";
  if (lhs == nullptr || rhs == nullptr || out == nullptr) {
    throw Error(what + ": " +
                (lhs == nullptr   ? "lhs"
                 : rhs == nullptr ? "rhs"
                                  : "out") +
                " is null");
  }
  if (planned_.has_bias && bias == nullptr) {
    throw Error(what + " was planned with a bias but got none");
  }
  if (!planned_.has_bias && bias != nullptr) {
    throw Error(what + " was planned without a bias but got one");
  }
}

void GroupedGemmPlan::execute(std::span<const int32_t> group_sizes, const void* lhs,
                              const void* rhs, const void* bias, void* out) {
  if (is_fp8(desc_.dtype)) {
    throw Error("grouped GEMM '" + desc_.name +
                "' has FP8 inputs: call execute_scaled with their scale_inv");
  }
  run(group_sizes, lhs, nullptr, rhs, nullptr, bias, out);
}

void GroupedGemmPlan::execute_scaled(std::span<const int32_t> group_sizes, const void* lhs,
                                     const float* lhs_scale_inv, const void* rhs,
                                     const float* rhs_scale_inv, const void* bias, void* out) {
  const std::string what = "grouped GEMM '" + desc_.name + "'";
  if (!is_fp8(desc_.dtype)) {
    throw Error(what + " has " + std::string(dtype_name(desc_.dtype)) +
                " inputs: execute_scaled is for FP8 plans, call execute");
  }
  if (lhs_scale_inv == nullptr || rhs_scale_inv == nullptr) {
    throw Error(what + ": " + (lhs_scale_inv == nullptr ? "lhs" : "rhs") +
                "_scale_inv is null (an FP8 call needs G float32 values for each operand)");
  }
  run(group_sizes, lhs, lhs_scale_inv, rhs, rhs_scale_inv, bias, out);
}

void GroupedGemmPlan::run(std::span<const int32_t> group_sizes, const void* lhs,
                          const float* lhs_scale_inv, const void* rhs, const float* rhs_scale_inv,
                          const void* bias, void* out) {
  check_operands(lhs, rhs, bias, out);
  check_group_sizes(group_sizes);
  const auto slot = [this](int64_t i) {
    return static_cast<float*>(
        static_cast<void*>(static_cast<char*>(scale_slots_.get()) + i * kScaleSlotBytes));
  };
  if (lhs_scale_inv != nullptr) {
    // cuBLASLt refuses a scale pointer that is not 16-byte aligned (CUBLAS_STATUS_NOT_SUPPORTED
    // from cublasLtMatmul on the H200, cuBLASLt 13.1), and group g's value of a [G] array is at
    // 4g bytes: every value gets a slot of its own first. Stream 0, as the GEMMs that read them.
    const auto groups = static_cast<int64_t>(group_sizes.size());
    for (int64_t g = 0; g < groups; ++g) {
      be_.copy(slot(g), lhs_scale_inv + g, sizeof(float), 0, "lhs_scale_inv to its slot");
      be_.copy(slot(groups + g), rhs_scale_inv + g, sizeof(float), 0, "rhs_scale_inv to its slot");
    }
  }
  if (runner_ != nullptr) {
    if (runner_->run(group_sizes, lhs, rhs, bias, out)) return;
    ++loop_fallbacks_;
  }

  const auto in_size = static_cast<int64_t>(dtype_size(desc_.dtype));
  const auto out_size = static_cast<int64_t>(dtype_size(planned_.out_dtype));
  const auto* a = static_cast<const char*>(lhs);
  const auto* b = static_cast<const char*>(rhs);
  const auto* c = static_cast<const char*>(bias);
  auto* o = static_cast<char*>(out);
  const bool rows = desc_.form == GroupedForm::kRaggedRows;
  int64_t off = 0;  // the group's first row (kRaggedRows) or contracting index
  for (size_t g = 0; g < group_sizes.size(); ++g) {
    const int64_t size = group_sizes[g];
    const auto gi = static_cast<int64_t>(g);
    GemmTask t;
    t.in_dtype = desc_.dtype;
    t.out_dtype = planned_.out_dtype;
    if (lhs_scale_inv != nullptr) {  // FP8: group g's scale_inv of each operand
      t.rhs_dtype = desc_.rhs_dtype.value_or(desc_.dtype);
      t.lhs_scale_inv = slot(gi);
      t.rhs_scale_inv = slot(static_cast<int64_t>(group_sizes.size()) + gi);
    }
    t.lhs_transposed = lhs_trans_;
    t.rhs_transposed = rhs_trans_;
    t.n = n_;
    t.ldc = n_;
    t.bias = c != nullptr ? c + gi * n_ * out_size : nullptr;
    t.label = labels_[g].c_str();
    if (rows) {
      // lhs rows [off, off + size) of [M, K] (or those columns of [K, M]); rhs[g]; out rows.
      const int64_t m_total = ragged_;
      t.m = size;
      t.k = k_;
      t.lhs = a + (lhs_trans_ ? off : off * k_) * in_size;
      t.lda = lhs_trans_ ? m_total : k_;
      t.rhs = b + gi * k_ * n_ * in_size;
      t.ldb = rhs_trans_ ? k_ : n_;
      t.out = o + off * n_ * out_size;
    } else {
      // Contracting indices [off, off + size): those rows of [K, M] / [K, N], or columns of
      // [M, K] / [N, K]; out[g].
      const int64_t k_total = ragged_;
      t.m = m_;
      t.k = size;
      t.lhs = a + (lhs_trans_ ? off * m_ : off) * in_size;
      t.lda = lhs_trans_ ? m_ : k_total;
      t.rhs = b + (rhs_trans_ ? off : off * n_) * in_size;
      t.ldb = rhs_trans_ ? k_total : n_;
      t.out = o + gi * m_ * n_ * out_size;
    }
    off += size;
    if (t.m == 0 || t.n == 0) continue;  // nothing to write
    if (t.k == 0) {
      // An empty contraction: out = 0 (+ bias), the block dense (ldc = n). cuBLASLt refuses
      // k = 0, so no GEMM.
      be_.sum_partials({}, t.out_dtype, t.m * t.n, t.bias, n_, t.out, t.out_dtype, 0);
      continue;
    }
    be_.gemm(t, 0);
  }
}

}  // namespace cgemm
