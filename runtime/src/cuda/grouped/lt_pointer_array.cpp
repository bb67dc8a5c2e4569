// make_pointer_array_matmul (lt_pointer_array.hpp).

#include "lt_pointer_array.hpp"

#include "cgemm/core/error.hpp"

namespace cgemm::grouped {

namespace {

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
    case DType::kFloat8E4M3:
      return CUDA_R_8F_E4M3;
    case DType::kFloat8E5M2:
      return CUDA_R_8F_E5M2;
    default:
      return CUDA_R_32F;
  }
}

void layout(cublasLtMatrixLayout_t& l, cudaDataType_t t, uint64_t r, uint64_t c, int64_t ld,
            int count, const std::string& where) {
  check_lt(cublasLtMatrixLayoutCreate(&l, t, r, c, ld), where, "cublasLtMatrixLayoutCreate");
  const auto mode = static_cast<int32_t>(CUBLASLT_BATCH_MODE_POINTER_ARRAY);
  check_lt(
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode)),
      where, "cublasLtMatrixLayoutSetAttribute(BATCH_MODE)");
  check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                            sizeof(count)),
           where, "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
}

template <typename T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v,
         const std::string& where) {
  check_lt(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)), where,
           "cublasLtMatmulDescSetAttribute(" + std::to_string(static_cast<int>(attr)) + ")");
}

// False where the heuristic finds no algorithm.
bool build(cublasLtHandle_t handle, const RaggedRowsGeometry& g, int64_t rows, int count,
           size_t workspace_bytes, const std::string& where, PointerArrayMatmul& e) {
  const cudaDataType_t t_lhs = lt_type(g.dtype), t_rhs = lt_type(g.rhs_dtype);
  const cudaDataType_t t_out = lt_type(g.out_dtype);
  check_lt(cublasLtMatmulDescCreate(&e.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), where,
           "cublasLtMatmulDescCreate");
  if (g.scaled) {
    // FP8: alpha is a device vector of N floats per entry, the entry's two scale_inv
    // (tile_scales.hpp); beta a host scalar (1 with a bias added into D, else 0).
    set(e.desc, CUBLASLT_MATMUL_DESC_POINTER_MODE,
        static_cast<int32_t>(CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST), where);
    set(e.desc, CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, g.n, where);
    // As the loop's FP8 GEMMs (GemmTask::fast_accumulation): the paths agree.
    set(e.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(g.fast_accumulation ? 1 : 0),
        where);
  }
  const cublasOperation_t op_a = g.rhs_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.lhs_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(e.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a, where);
  set(e.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b, where);
  // Column-major views (see the top of lt_pointer_array.hpp).
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t n = g.n, k = g.k;
  if (g.rhs_trans) {
    layout(e.a, t_rhs, u(k), u(n), k, count, where);  // rhs[g] [N, K] row-major
  } else {
    layout(e.a, t_rhs, u(n), u(k), n, count, where);  // rhs[g] [K, N]
  }
  if (g.lhs_trans) {
    layout(e.b, t_lhs, u(rows), u(k), g.m_total, count, where);  // a column block of lhs [K, M]
  } else {
    layout(e.b, t_lhs, u(k), u(rows), k, count, where);  // rows of lhs [M, K]
  }
  layout(e.d, t_out, u(n), u(rows), n, count, where);
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), where, "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = workspace_bytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t rc = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  // No in-place split-K: it accumulates partial sums in D itself (cublasLt.h,
  // CUBLASLT_REDUCTION_SCHEME_INPLACE), and two batch entries may have the same D rows (the
  // tiles runner's overlapping tiles, the device tiles runner's spare entries), each of which
  // would add into the other's partials (and with a bias, D holds the bias to add). Reductions
  // in the workspace (per entry, then written once) and no split stay allowed.
  const uint32_t schemes =
      CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  if (rc == CUBLAS_STATUS_SUCCESS) {
    rc = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                              &schemes, sizeof(schemes));
  }
  // The heuristic assumes A, B, C and D 256-byte aligned unless told (cublasLt.h,
  // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, default 256), and in pointer-array mode
  // cublasLtMatmul cannot check the pointers, which sit on the device: a tile's rows are
  // only 16 bytes aligned.
  for (const cublasLtMatmulPreferenceAttributes_t attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    const uint32_t bytes = 16;
    if (rc == CUBLAS_STATUS_SUCCESS) {
      rc = cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes));
    }
  }
  if (rc == CUBLAS_STATUS_SUCCESS) {
    rc = cublasLtMatmulAlgoGetHeuristic(handle, e.desc, e.a, e.b, e.d, e.d, pref, 1, &result,
                                        &found);
  }
  static_cast<void>(cublasLtMatmulPreferenceDestroy(pref));
  // The heuristic answers NOT_SUPPORTED when it finds nothing.
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED || (rc == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return false;
  }
  check_lt(rc, where, "cublasLtMatmulAlgoGetHeuristic");
  check_lt(result.state, where, "cublasLtMatmulAlgoGetHeuristic (its first result)");
  e.algo = result.algo;
  return true;
}

}  // namespace

void check_lt(cublasStatus_t rc, const std::string& where, const std::string& call) {
  if (rc == CUBLAS_STATUS_SUCCESS) return;
  throw Error(where + ": " + call + " failed: " + cublasLtGetStatusName(rc) + " (" +
              cublasLtGetStatusString(rc) + ")");
}

bool make_pointer_array_matmul(cublasLtHandle_t handle, const RaggedRowsGeometry& g, int64_t rows,
                               int count, size_t workspace_bytes, const std::string& where,
                               PointerArrayMatmul& m) {
  try {
    if (build(handle, g, rows, count, workspace_bytes, where, m)) return true;
  } catch (...) {
    destroy(m);
    throw;
  }
  destroy(m);
  return false;
}

void destroy(PointerArrayMatmul& m) noexcept {
  if (m.a != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(m.a));
  if (m.b != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(m.b));
  if (m.d != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(m.d));
  if (m.desc != nullptr) static_cast<void>(cublasLtMatmulDescDestroy(m.desc));
  m = PointerArrayMatmul{};
}

}  // namespace cgemm::grouped
