#include "cgemm/gemm/cublaslt_gemm.hpp"

#include <cublasLt.h>

#include <array>
#include <compare>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cgemm/gemm/cuda_check.hpp"
#include "cublaslt_kernels.hpp"

namespace cgemm {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

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

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address:
// cuBLASLt picks kernels for the alignment it is told, so a cached algorithm is only reused for
// pointers at least as aligned as the ones it was chosen for.
uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && (a % align) != 0) align /= 2;
  return align;
}

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string_view s(v);
  return s == "1" || s == "true" || s == "True" || s == "TRUE" || s == "yes" || s == "on";
}

std::string problem_str(const GemmTask& t) {
  std::string s =
      "GEMM m=" + std::to_string(t.m) + " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
      " batch=" + std::to_string(t.batch) + " (" + std::string(dtype_name(t.in_dtype)) + " -> " +
      std::string(dtype_name(t.out_dtype)) + ", lhs [m, k] lda=" + std::to_string(t.lda) +
      ", rhs " + (t.rhs_transposed ? "[n, k]" : "[k, n]") + " ldb=" + std::to_string(t.ldb) +
      ", out [m, n] ldc=" + std::to_string(t.ldc);
  if (t.batch > 1) {
    s += ", lhs batch stride " + std::to_string(t.lhs_batch_stride) + ", out batch stride " +
         std::to_string(t.out_batch_stride);
  }
  s += t.bias != nullptr ? ", bias)" : ")";
  return s;
}

// Everything the heuristic's answer depends on. Pointer values are not in it, only their
// alignments.
struct Key {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0, lhs_stride = 0, out_stride = 0;
  int in_dtype = 0, out_dtype = 0;
  bool rhs_transposed = false, bias = false, beta_nonzero = false;
  uint32_t align_lhs = 0, align_rhs = 0, align_out = 0, align_bias = 0;
  auto operator<=>(const Key&) const = default;
};

}  // namespace

struct CublasLtGemm::Impl {
  // One cached problem: its descriptors and the heuristic's candidates, best first. `chosen`
  // indexes the algorithm in use, so a tuner can time the candidates and change it.
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> candidates;
    size_t chosen = 0;
    bool fused_bias = false;  // else the bias (if any) is added by a kernel afterwards

    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() {
      if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
      if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
      if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
      if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
    }
  };

  std::string where;
  int device = 0;
  int cc = 0;
  size_t workspace = 0;
  bool fast_accum = true;
  cublasLtHandle_t handle = nullptr;
  std::unordered_map<cudaStream_t, void*> workspaces;
  std::map<Key, std::unique_ptr<Plan>> plans;

  void check(cublasStatus_t st, std::string_view call, const GemmTask* t) const {
    if (st == CUBLAS_STATUS_SUCCESS) return;
    std::string msg;
    if (!where.empty()) msg.append(where).append(": ");
    msg.append(call).append(" failed: ").append(cublasLtGetStatusName(st));
    msg.append(" (").append(cublasLtGetStatusString(st)).append(")");
    if (t != nullptr) msg.append(" for ").append(problem_str(*t));
    throw Error(msg);
  }

  void* workspace_for(cudaStream_t stream) {
    auto it = workspaces.find(stream);
    if (it != workspaces.end()) return it->second;
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, workspace);
    if (rc != cudaSuccess) {
      throw_cuda_error(
          rc, "cudaMalloc(cuBLASLt workspace, " + std::to_string(workspace) + " bytes)", where);
    }
    workspaces.emplace(stream, p);
    return p;
  }

  template <typename T>
  void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v,
                const GemmTask& t) const {
    check(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)), "cublasLtMatmulDescSetAttribute",
          &t);
  }
  template <typename T>
  void set_layout(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr, const T& v,
                  const GemmTask& t) const {
    check(cublasLtMatrixLayoutSetAttribute(l, attr, &v, sizeof(v)),
          "cublasLtMatrixLayoutSetAttribute", &t);
  }

  // (Re)creates the matmul descriptor, with the bias epilogue when `fuse_bias`.
  void make_desc(Plan& p, const GemmTask& t, bool fuse_bias) const {
    if (p.desc != nullptr) {
      cublasLtMatmulDescDestroy(p.desc);
      p.desc = nullptr;
    }
    check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          "cublasLtMatmulDescCreate", &t);
    const cublasOperation_t op_a = t.rhs_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = CUBLAS_OP_N;
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a, t);
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b, t);
    if (is_fp8(t.in_dtype)) {
      const int8_t fast = fast_accum ? 1 : 0;
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast, t);
    }
    if (fuse_bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epi, t);
      const int32_t bias_type = static_cast<int32_t>(cuda_type(t.out_dtype));
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, t);
      // The heuristic reads the bias pointer's alignment; the pointer is set again per call.
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, t.bias, t);
    }
    p.fused_bias = fuse_bias;
  }

  // Asks the heuristic for up to kCandidates algorithms; returns how many it gave.
  int query(Plan& p, const GemmTask& t, const Key& key) const {
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", &t);
    int returned = 0;
    std::array<cublasLtMatmulHeuristicResult_t, kCandidates> results{};
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    try {
      const uint64_t ws = workspace;
      check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof(ws)),
            "cublasLtMatmulPreferenceSetAttribute", &t);
      const std::array<std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t>, 4> aligns = {{
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_rhs},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_lhs},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out},
          {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out},
      }};
      for (const auto& [attr, value] : aligns) {
        check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
              "cublasLtMatmulPreferenceSetAttribute", &t);
      }
      st = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c, p.c, pref, kCandidates,
                                          results.data(), &returned);
    } catch (...) {
      cublasLtMatmulPreferenceDestroy(pref);
      throw;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    // NOT_SUPPORTED is how the heuristic says "no algorithm"; anything else is a real error.
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) return 0;
    check(st, "cublasLtMatmulAlgoGetHeuristic", &t);
    p.candidates.clear();
    for (int i = 0; i < returned; ++i) {
      if (results[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) {
        p.candidates.push_back(results[static_cast<size_t>(i)]);
      }
    }
    p.chosen = 0;
    return static_cast<int>(p.candidates.size());
  }

  std::unique_ptr<Plan> make_plan(const GemmTask& t, const Key& key) const {
    auto p = std::make_unique<Plan>();
    const cudaDataType_t in = cuda_type(t.in_dtype);
    const cudaDataType_t out = cuda_type(t.out_dtype);
    // A = op(rhs)^T as stored: column-major [n, k] (ld ldb) or, transposed, [k, n].
    if (t.rhs_transposed) {
      check(cublasLtMatrixLayoutCreate(&p->a, in, static_cast<uint64_t>(t.k),
                                       static_cast<uint64_t>(t.n), t.ldb),
            "cublasLtMatrixLayoutCreate(rhs)", &t);
    } else {
      check(cublasLtMatrixLayoutCreate(&p->a, in, static_cast<uint64_t>(t.n),
                                       static_cast<uint64_t>(t.k), t.ldb),
            "cublasLtMatrixLayoutCreate(rhs)", &t);
    }
    // B = lhs^T: column-major [k, m], ld lda. C = D = out^T: column-major [n, m], ld ldc.
    check(cublasLtMatrixLayoutCreate(&p->b, in, static_cast<uint64_t>(t.k),
                                     static_cast<uint64_t>(t.m), t.lda),
          "cublasLtMatrixLayoutCreate(lhs)", &t);
    check(cublasLtMatrixLayoutCreate(&p->c, out, static_cast<uint64_t>(t.n),
                                     static_cast<uint64_t>(t.m), t.ldc),
          "cublasLtMatrixLayoutCreate(out)", &t);
    if (t.batch > 1) {
      const int32_t count = static_cast<int32_t>(t.batch);
      const int64_t zero = 0;  // rhs is shared by every batch entry
      for (cublasLtMatrixLayout_t l : {p->a, p->b, p->c}) {
        set_layout(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count, t);
      }
      set_layout(p->a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, zero, t);
      set_layout(p->b, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, t.lhs_batch_stride, t);
      set_layout(p->c, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, t.out_batch_stride, t);
    }
    const bool bias = t.bias != nullptr;
    make_desc(*p, t, bias);
    int found = query(*p, t, key);
    if (found == 0 && bias) {
      // No fused-bias kernel for this combination (e.g. some out dtypes): GEMM, then a kernel.
      make_desc(*p, t, false);
      found = query(*p, t, key);
    }
    if (found == 0) {
      std::string msg;
      if (!where.empty()) msg.append(where).append(": ");
      msg += "cuBLASLt has no algorithm for " + problem_str(t) +
             " (supported: bf16 or fp16 in with the same dtype or fp32 out; fp32 in and out)";
      throw Error(msg);
    }
    return p;
  }

  void validate(const GemmTask& t) const {
    auto fail = [&](const std::string& why) {
      std::string msg;
      if (!where.empty()) msg.append(where).append(": ");
      throw Error(msg + "invalid " + problem_str(t) + ": " + why);
    };
    if (t.m < 0 || t.n < 0 || t.k < 0 || t.batch < 0) fail("negative size");
    if (is_fp8(t.in_dtype) || t.in_dtype == DType::kFloat4E2M1) {
      fail("FP8/FP4 inputs need scale_inv operands, which GemmTask does not carry yet");
    }
    if (t.k == 0) fail("k = 0 (an empty contraction) is not supported by cuBLASLt");
    if (t.lhs == nullptr || t.rhs == nullptr || t.out == nullptr) fail("null operand pointer");
    if (t.lda < t.k) fail("lda < k");
    if (t.ldb < (t.rhs_transposed ? t.k : t.n)) fail("ldb < row length of rhs");
    if (t.ldc < t.n) fail("ldc < n");
    if (t.batch > INT32_MAX) fail("batch exceeds cuBLASLt's int32 batch count");
    if (t.batch > 1 && (t.lhs_batch_stride < 0 || t.out_batch_stride < 0)) {
      fail("negative batch stride");
    }
    if (t.out_dtype != t.in_dtype && t.out_dtype != DType::kFloat32) {
      fail("out dtype must be the in dtype or float32");
    }
  }

  void run(GemmTask t, cudaStream_t stream) {
    validate(t);
    if (t.m == 0 || t.n == 0 || t.batch == 0) return;
    // Batch blocks that follow each other row after row are one taller GEMM: same rhs, and
    // cuBLASLt runs one big problem faster than a batch of small ones.
    if (t.batch > 1 && t.lhs_batch_stride == t.m * t.lda && t.out_batch_stride == t.m * t.ldc) {
      t.m *= t.batch;
      t.batch = 1;
      t.lhs_batch_stride = 0;
      t.out_batch_stride = 0;
    }
    if (t.batch == 1) {
      t.lhs_batch_stride = 0;
      t.out_batch_stride = 0;
    }
    Key key;
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
    key.out_dtype = static_cast<int>(t.out_dtype);
    key.rhs_transposed = t.rhs_transposed;
    key.bias = t.bias != nullptr;
    key.beta_nonzero = t.beta != 0.0f;
    key.align_lhs = alignment_of(t.lhs);
    key.align_rhs = alignment_of(t.rhs);
    key.align_out = alignment_of(t.out);
    key.align_bias = t.bias != nullptr ? alignment_of(t.bias) : 0;

    auto it = plans.find(key);
    if (it == plans.end()) it = plans.emplace(key, make_plan(t, key)).first;
    Plan& p = *it->second;
    if (p.fused_bias) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, t.bias, t);
    const cublasLtMatmulHeuristicResult_t& algo = p.candidates[p.chosen];
    void* ws = workspace_for(stream);
    const float alpha = t.alpha;
    const float beta = t.beta;
    check(cublasLtMatmul(handle, p.desc, &alpha, t.rhs, p.a, t.lhs, p.b, &beta, t.out, p.c, t.out,
                         p.c, &algo.algo, ws, workspace, stream),
          "cublasLtMatmul", &t);
    if (t.bias != nullptr && !p.fused_bias) {
      const cudaError_t rc = detail::launch_add_bias(t.out, t.bias, t.out_dtype, t.batch, t.m, t.n,
                                                     t.ldc, t.out_batch_stride, stream);
      if (rc != cudaSuccess) throw_cuda_error(rc, "bias kernel after " + problem_str(t), where);
    }
  }
};

CublasLtGemm::CublasLtGemm(std::string where) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.where = std::move(where);
  check_cuda(cudaGetDevice(&s.device), "cudaGetDevice", s.where);
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, s.device),
             "cudaDeviceGetAttribute(compute capability)", s.where);
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, s.device),
             "cudaDeviceGetAttribute(compute capability)", s.where);
  s.cc = major * 10 + minor;
  s.workspace = (major >= 9 ? 32 : 4) * kMiB;
  // Transformer Engine's switch: high-precision (split) accumulation means no fast accumulation.
  s.fast_accum = !env_true("NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION");
  s.check(cublasLtCreate(&s.handle), "cublasLtCreate", nullptr);
}

CublasLtGemm::~CublasLtGemm() {
  if (!impl_) return;
  impl_->plans.clear();
  // Queued GEMMs may still use a workspace, and their streams may be gone already: wait for
  // the whole device before freeing.
  if (!impl_->workspaces.empty()) cudaDeviceSynchronize();
  for (auto& [stream, p] : impl_->workspaces) cudaFree(p);
  if (impl_->handle != nullptr) cublasLtDestroy(impl_->handle);
}

void CublasLtGemm::add_stream(cudaStream_t stream) { impl_->workspace_for(stream); }

void CublasLtGemm::run(const GemmTask& task, cudaStream_t stream) { impl_->run(task, stream); }

size_t CublasLtGemm::workspace_bytes() const { return impl_->workspace; }

bool CublasLtGemm::fp8_fast_accumulation() const { return impl_->fast_accum; }

size_t CublasLtGemm::cached_problems() const { return impl_->plans.size(); }

std::string CublasLtGemm::version() {
  const size_t v = cublasLtGetVersion();
  return "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace cgemm
