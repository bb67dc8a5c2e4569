#include "cublaslt_plan.hpp"

#include <array>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm::detail {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kFloat8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::kFloat8E5M2:
      return CUDA_R_8F_E5M2;
    default:
      throw Error("cuBLASLt GEMM: dtype " + std::string(dtype_name(t)) + " is not supported");
  }
}

template <typename T>
void set_desc(const LtContext& ctx, cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
              const T& v, const GemmTask& t) {
  ctx.check(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)),
            "cublasLtMatmulDescSetAttribute", &t);
}

template <typename T>
void set_layout(const LtContext& ctx, cublasLtMatrixLayout_t l,
                cublasLtMatrixLayoutAttribute_t attr, const T& v, const GemmTask& t) {
  ctx.check(cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof(v)),
            "cublasLtMatrixLayoutSetAttribute", &t);
}

// Row-major [rows, cols] with row stride ld is column-major [cols, rows] with leading
// dimension ld: the layout of a stored operand as cuBLASLt sees it.
void make_layout(const LtContext& ctx, cublasLtMatrixLayout_t* l, cudaDataType_t type, int64_t rows,
                 int64_t cols, int64_t ld, const char* call, const GemmTask& t) {
  ctx.check(cublasLtMatrixLayoutCreate(l, type, static_cast<uint64_t>(cols),
                                       static_cast<uint64_t>(rows), ld),
            call, &t);
}

// Asks the heuristic for up to ctx.candidates algorithms; returns how many it gave.
int query(LtPlan& p, const LtContext& ctx, const GemmTask& t, const PlanKey& key) {
  CallDesc desc(ctx, t, p.fused_bias);
  cublasLtMatmulPreference_t pref = nullptr;
  ctx.check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", &t);
  int returned = 0;
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(ctx.candidates));
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  try {
    const uint64_t ws = ctx.workspace;
    ctx.check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &ws, sizeof(ws)),
              "cublasLtMatmulPreferenceSetAttribute", &t);
    const std::array<std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t>, 4> aligns = {{
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_rhs},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_lhs},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out},
    }};
    for (const auto& [attr, value] : aligns) {
      ctx.check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
                "cublasLtMatmulPreferenceSetAttribute", &t);
    }
    st = cublasLtMatmulAlgoGetHeuristic(ctx.handle, desc.get(), p.a, p.b, p.c, p.c, pref,
                                        ctx.candidates, results.data(), &returned);
  } catch (...) {
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED is how the heuristic says "no algorithm"; anything else is a real error.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return 0;
  ctx.check(st, "cublasLtMatmulAlgoGetHeuristic", &t);
  p.candidates.clear();
  for (int i = 0; i < returned; ++i) {
    if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) {
      p.candidates.push_back(results[static_cast<size_t>(i)]);
    }
  }
  p.chosen = 0;
  return static_cast<int>(p.candidates.size());
}

}  // namespace

std::string problem_str(const GemmTask& t) {
  std::string s =
      "GEMM m=" + std::to_string(t.m) + " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
      " batch=" + std::to_string(t.batch) + " (" + std::string(dtype_name(t.in_dtype)) +
      (t.rhs_type() != t.in_dtype ? " x " + std::string(dtype_name(t.rhs_type())) : "") + " -> " +
      std::string(dtype_name(t.out_dtype)) + ", lhs " + (t.lhs_transposed ? "[k, m]" : "[m, k]") +
      " lda=" + std::to_string(t.lda) + ", rhs " + (t.rhs_transposed ? "[n, k]" : "[k, n]") +
      " ldb=" + std::to_string(t.ldb) + ", out [m, n] ldc=" + std::to_string(t.ldc);
  if (t.batch > 1) {
    s += ", lhs batch stride " + std::to_string(t.lhs_batch_stride) + ", out batch stride " +
         std::to_string(t.out_batch_stride);
  }
  if (t.bias != nullptr) s += ", bias";
  if (t.quantized()) s += t.fast_accumulation ? ", fast accumulation" : ", split accumulation";
  return s + ")";
}

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && (a % align) != 0) align /= 2;
  return align;
}

void LtContext::check(cublasStatus_t st, std::string_view call, const GemmTask* t) const {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  std::string msg;
  if (!where.empty()) msg.append(where).append(": ");
  msg.append(call).append(" failed: ").append(cublasLtGetStatusName(st));
  msg.append(" (").append(cublasLtGetStatusString(st)).append(")");
  if (t != nullptr) msg.append(" for ").append(problem_str(*t));
  throw Error(msg);
}

PlanKey plan_key(const GemmTask& t) {
  PlanKey key;
  key.m = t.m;
  key.n = t.n;
  key.k = t.k;
  key.batch = t.batch;
  key.lda = t.lda;
  key.ldb = t.ldb;
  key.ldc = t.ldc;
  key.lhs_stride = t.lhs_batch_stride;
  key.out_stride = t.out_batch_stride;
  key.in_dtype = static_cast<int>(t.in_dtype);
  key.rhs_dtype = static_cast<int>(t.rhs_type());
  key.out_dtype = static_cast<int>(t.out_dtype);
  key.scaling = t.quantized() ? static_cast<int>(t.block_scaling) : 0;
  key.fast_accum = t.quantized() && t.fast_accumulation;
  key.lhs_transposed = t.lhs_transposed;
  key.rhs_transposed = t.rhs_transposed;
  key.bias = t.bias != nullptr;
  key.beta_nonzero = t.beta != 0.0f;
  key.align_lhs = alignment_of(t.lhs);
  key.align_rhs = alignment_of(t.rhs);
  key.align_out = alignment_of(t.out);
  key.align_bias = t.bias != nullptr ? alignment_of(t.bias) : 0;
  return key;
}

void LtPlan::reset() {
  if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
  if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
  if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
  c = b = a = nullptr;
  candidates.clear();
  chosen = 0;
  fused_bias = false;
  choice = GemmChoice{};
}

// Row-major operands are handed to column-major cuBLASLt as the transposed problem
//   out^T [n, m] = op(rhs)^T [n, k] * op(lhs)^T [k, m]:
// cuBLASLt's A is rhs and its B is lhs, each as stored, and a stored operand whose row-major
// shape already is the transposed one gets CUBLAS_OP_T (see CallDesc).
void build_plan(LtPlan& p, const LtContext& ctx, const GemmTask& t, const PlanKey& key) {
  p.reset();
  const cudaDataType_t in = cuda_type(t.in_dtype);
  const cudaDataType_t out = cuda_type(t.out_dtype);
  // A: rhs as stored, row-major [k, n] or, transposed, [n, k] (row stride ldb).
  make_layout(ctx, &p.a, cuda_type(t.rhs_type()), t.rhs_transposed ? t.n : t.k,
              t.rhs_transposed ? t.k : t.n, t.ldb, "cublasLtMatrixLayoutCreate(rhs)", t);
  // B: lhs as stored, row-major [m, k] or, transposed, [k, m] (row stride lda).
  make_layout(ctx, &p.b, in, t.lhs_transposed ? t.k : t.m, t.lhs_transposed ? t.m : t.k, t.lda,
              "cublasLtMatrixLayoutCreate(lhs)", t);
  // C = D: out, row-major [m, n] (row stride ldc).
  make_layout(ctx, &p.c, out, t.m, t.n, t.ldc, "cublasLtMatrixLayoutCreate(out)", t);
  if (t.batch > 1) {
    const int32_t count = static_cast<int32_t>(t.batch);
    const int64_t zero = 0;  // rhs is shared by every batch entry
    for (cublasLtMatrixLayout_t l : {p.a, p.b, p.c}) {
      set_layout(ctx, l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count, t);
    }
    set_layout(ctx, p.a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, zero, t);
    set_layout(ctx, p.b, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, t.lhs_batch_stride, t);
    set_layout(ctx, p.c, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, t.out_batch_stride, t);
  }
  const bool bias = t.bias != nullptr;
  p.fused_bias = bias;
  int found = query(p, ctx, t, key);
  if (found == 0 && bias) {
    // No fused-bias kernel for this combination (e.g. some out dtypes): GEMM, then a kernel.
    p.fused_bias = false;
    found = query(p, ctx, t, key);
  }
  if (found == 0) {
    std::string msg;
    if (!ctx.where.empty()) msg.append(ctx.where).append(": ");
    msg += "cuBLASLt has no algorithm for " + problem_str(t) +
           (t.quantized()
                ? " (FP8 needs 16-byte aligned operands and leading dimensions, and bf16, fp16 "
                  "or fp32 out)"
                : " (supported: bf16 or fp16 in with the same dtype or fp32 out; fp32 in and out)");
    throw Error(msg);
  }
  p.choice.problem = problem_str(t);
  p.choice.candidates = found;
  p.choice.fused_bias = p.fused_bias;
}

CallDesc::CallDesc(const LtContext& ctx, const GemmTask& t, bool fuse_bias) {
  cublasLtMatmulDesc_t d = get();
  ctx.check(cublasLtMatmulDescInit(d, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescInit",
            &t);
  const cublasOperation_t op_a = t.rhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = t.lhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc(ctx, d, CUBLASLT_MATMUL_DESC_TRANSA, op_a, t);
  set_desc(ctx, d, CUBLASLT_MATMUL_DESC_TRANSB, op_b, t);
  if (t.quantized()) {
    const int8_t fast = t.fast_accumulation ? 1 : 0;
    set_desc(ctx, d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast, t);
    // D = alpha * scale_A * scale_B * (A B) + ...: A is the rhs, B the lhs (see build_plan).
    // Per-tensor scales are cuBLASLt's default scale mode (one fp32 scalar each).
    const void* a_scale = t.rhs_scale_inv != nullptr ? t.rhs_scale_inv : ctx.one;
    const void* b_scale = t.lhs_scale_inv != nullptr ? t.lhs_scale_inv : ctx.one;
    set_desc(ctx, d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale, t);
    set_desc(ctx, d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale, t);
  }
  if (fuse_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    set_desc(ctx, d, CUBLASLT_MATMUL_DESC_EPILOGUE, epi, t);
    const int32_t bias_type = static_cast<int32_t>(cuda_type(t.out_dtype));
    set_desc(ctx, d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, t);
    // The call's own pointer (the heuristic, too, reads its alignment).
    set_desc(ctx, d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, t.bias, t);
  }
}

cublasStatus_t launch(const LtContext& ctx, const LtPlan& p, CallDesc& desc, size_t candidate,
                      const GemmTask& t, void* out, void* ws, cudaStream_t stream) {
  const float alpha = t.alpha;
  const float beta = t.beta;
  return cublasLtMatmul(ctx.handle, desc.get(), &alpha, t.rhs, p.a, t.lhs, p.b, &beta, out, p.c,
                        out, p.c, &p.candidates[candidate].algo, ws, ctx.workspace, stream);
}

}  // namespace cgemm::detail
