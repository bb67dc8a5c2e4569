#include "cgemm/gemm/cublaslt_gemm.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <compare>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/env.hpp"
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

// CGEMM_GEMM_AUTOTUNE: on unless set to a false flag (0 / off / false / no).
// CGEMM_GEMM_LOG=1: print every tuning's candidate times (the chosen one starred) to stderr.
bool log_choices() {
  static const bool on = env_flag(env::kGemmLog).value_or(false);
  return on;
}

bool autotune_from_env() { return env_flag(env::kGemmAutotune).value_or(true); }

int candidates_from_env(const std::string& where) {
  const long long n = env_int(env::kGemmCandidates).value_or(CublasLtGemm::kDefaultCandidates);
  if (n < 1 || n > CublasLtGemm::kMaxCandidates) {
    throw Error((where.empty() ? "" : where + ": ") + "CGEMM_GEMM_CANDIDATES=" + std::to_string(n) +
                ": must be 1.." + std::to_string(CublasLtGemm::kMaxCandidates));
  }
  return static_cast<int>(n);
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
  // One cached problem: its descriptors and the heuristic's candidates, best first; `chosen`
  // indexes the algorithm in use. Built and tuned once under `mu`; everything but the bias
  // pointer in `desc` is read-only once `ready` is set.
  struct Plan {
    std::mutex mu;  // held while building and tuning, and around a fused-bias launch
    std::atomic<bool> ready{false};
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> candidates;
    size_t chosen = 0;
    bool fused_bias = false;  // else the bias (if any) is added by a kernel afterwards
    GemmChoice choice;

    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() { reset(); }
    void reset() {
      if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
      if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
      if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
      if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
      c = b = a = nullptr;
      desc = nullptr;
      candidates.clear();
      chosen = 0;
      fused_bias = false;
      choice = GemmChoice{};
    }
  };

  // Timing events, destroyed on every exit path.
  struct Events {
    std::vector<cudaEvent_t> e;
    Events() = default;
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;
    ~Events() {
      for (cudaEvent_t x : e) cudaEventDestroy(x);
    }
  };

  // Scratch output for timing with beta != 0: freed in stream order on every exit path.
  struct Scratch {
    void* p = nullptr;
    cudaStream_t stream = nullptr;
    Scratch() = default;
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    ~Scratch() {
      if (p != nullptr) cudaFreeAsync(p, stream);
    }
  };

  std::string where;
  int device = 0;
  int cc = 0;
  size_t workspace = 0;
  bool fast_accum = true;
  bool autotune = true;
  int candidates = CublasLtGemm::kDefaultCandidates;
  size_t l2_bytes = 0;  // the device's L2, cleared between the tuner's timed runs
  cublasLtHandle_t handle = nullptr;
  mutable std::mutex mu;  // guards `workspaces` and `plans` (the map, not the plans' contents)
  std::unordered_map<cudaStream_t, void*> workspaces;
  std::map<Key, std::unique_ptr<Plan>> plans;
  std::atomic<int> tunings{0};

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
    const std::lock_guard<std::mutex> lock(mu);
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

  // Asks the heuristic for up to `candidates` algorithms; returns how many it gave.
  int query(Plan& p, const GemmTask& t, const Key& key) const {
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", &t);
    int returned = 0;
    std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(candidates));
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
      st = cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c, p.c, pref, candidates,
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

  // Fills `p` (descriptors and candidates) for the problem; throws when there is no algorithm.
  void build(Plan& plan, const GemmTask& t, const Key& key) const {
    plan.reset();
    Plan* p = &plan;
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
    p->choice.problem = problem_str(t);
    p->choice.candidates = found;
  }

  cublasStatus_t matmul(const Plan& p, size_t candidate, const GemmTask& t, void* out, void* ws,
                        cudaStream_t stream) const {
    const float alpha = t.alpha;
    const float beta = t.beta;
    return cublasLtMatmul(handle, p.desc, &alpha, t.rhs, p.a, t.lhs, p.b, &beta, out, p.c, out, p.c,
                          &p.candidates[candidate].algo, ws, workspace, stream);
  }

  // Chooses p.chosen, by timing when autotuning (see the header); records it in p.choice.
  // Called with p.mu held, before p is ready; the bias pointer is already set in p.desc.
  void tune(Plan& p, const GemmTask& t, const Key& key, cudaStream_t stream, void* ws) {
    GemmChoice& c = p.choice;
    const size_t n = p.candidates.size();
    c.chosen = 0;
    c.timed = false;
    c.chosen_ms = -1;
    c.candidate_ms.assign(n, -1.0);
    p.chosen = 0;
    if (!autotune) {
      c.note = "not timed: CGEMM_GEMM_AUTOTUNE=0";
      return;
    }
    if (n < 2) {
      c.note = "not timed: the heuristic offered one candidate";
      return;
    }
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (const cudaError_t rc = cudaStreamIsCapturing(stream, &capture); rc != cudaSuccess) {
      static_cast<void>(cudaGetLastError());  // handled: no timing
      c.note = std::string("not timed: cudaStreamIsCapturing failed: ") + cudaGetErrorName(rc);
      return;
    }
    if (capture != cudaStreamCaptureStatusNone) {
      c.note = "not timed: the stream was being captured into a CUDA graph";
      return;
    }

    // Where the timed GEMMs write: the real output when it is not read (beta == 0), since the
    // real GEMM overwrites it next on this stream; else a scratch output of the same extent.
    void* out = t.out;
    Scratch scratch;
    if (t.beta != 0.0f) {
      const int64_t extent = (t.batch - 1) * t.out_batch_stride + (t.m - 1) * t.ldc + t.n;
      const size_t bytes = static_cast<size_t>(extent) * dtype_size(t.out_dtype);
      void* s = nullptr;
      if (const cudaError_t rc = cudaMallocAsync(&s, bytes, stream); rc != cudaSuccess) {
        static_cast<void>(cudaGetLastError());  // handled: no timing
        c.note = "not timed: no scratch output (beta != 0): cudaMallocAsync(" +
                 std::to_string(bytes) + " bytes) failed: " + cudaGetErrorName(rc);
        return;
      }
      scratch.p = s;
      scratch.stream = stream;
      if (alignment_of(s) < key.align_out) {
        c.note = "not timed: the scratch output is less aligned than the output";
        return;
      }
      // Defined values for C (they do not change the timing; garbage might be NaN/Inf).
      check_cuda(cudaMemsetAsync(s, 0, bytes, stream), "cudaMemsetAsync(tuning scratch)", where);
      out = s;
    }

    // One warm-up per candidate (a failing one is left out), then kTimedRuns rounds, each
    // timing every candidate once in turn: a drift of the clocks during the tuning hits all
    // candidates alike instead of whichever was timed last. Each run has its own pair of
    // events, so the L2 clearing between runs is not timed.
    cublasStatus_t last_failure = CUBLAS_STATUS_SUCCESS;
    std::vector<size_t> live;
    for (size_t i = 0; i < n; ++i) {
      const cublasStatus_t st = matmul(p, i, t, out, ws, stream);
      if (st == CUBLAS_STATUS_SUCCESS) {
        live.push_back(i);
      } else {
        last_failure = st;
        static_cast<void>(cudaGetLastError());  // a failed launch's non-sticky error: handled
      }
    }
    if (live.empty()) {
      check(last_failure, "cublasLtMatmul (every one of " + std::to_string(n) + " candidates)", &t);
    }
    const size_t runs = live.size() * CublasLtGemm::kTimedRuns;
    // Each timed run starts with a cold L2 (as Triton's do_bench clears it): a stream-ordered
    // scratch of twice the L2 is overwritten before the run, outside its events, so a
    // candidate is not chosen for inputs that the previous run left in the cache. Without the
    // scratch (no memory) the runs are timed warm, and the choice says so.
    Scratch flush;
    size_t flush_bytes = 2 * l2_bytes;
    if (flush_bytes > 0) {
      if (cudaMallocAsync(&flush.p, flush_bytes, stream) == cudaSuccess) {
        flush.stream = stream;
      } else {
        static_cast<void>(cudaGetLastError());  // handled: timed with a warm L2
        flush.p = nullptr;
        flush_bytes = 0;
        c.note = "L2 not cleared between timed runs (no scratch memory)";
      }
    }
    Events ev;
    ev.e.reserve(2 * runs);
    for (size_t i = 0; i < 2 * runs; ++i) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreate(&e), "cudaEventCreate(GEMM tuning)", where);
      ev.e.push_back(e);
    }
    std::vector<std::vector<float>> ms(n);
    std::vector<bool> failed(n, false);  // failed in a timed run: left out like at warm-up
    for (size_t run = 0; run < runs; ++run) {
      const size_t i = live[run % live.size()];
      if (flush.p != nullptr) {
        check_cuda(cudaMemsetAsync(flush.p, static_cast<int>(run & 1), flush_bytes, stream),
                   "cudaMemsetAsync(GEMM tuning: clear the L2)", where);
      }
      check_cuda(cudaEventRecord(ev.e[2 * run], stream), "cudaEventRecord(GEMM tuning)", where);
      if (!failed[i]) {
        if (const cublasStatus_t st = matmul(p, i, t, out, ws, stream);
            st != CUBLAS_STATUS_SUCCESS) {
          failed[i] = true;
          last_failure = st;
          static_cast<void>(cudaGetLastError());  // handled: the candidate is left out
        }
      }
      check_cuda(cudaEventRecord(ev.e[2 * run + 1], stream), "cudaEventRecord(GEMM tuning)", where);
    }
    check_cuda(cudaEventSynchronize(ev.e[2 * runs - 1]),
               "cudaEventSynchronize(GEMM tuning) after " + problem_str(t), where);
    for (size_t run = 0; run < runs; ++run) {
      float x = 0;
      check_cuda(cudaEventElapsedTime(&x, ev.e[2 * run], ev.e[2 * run + 1]),
                 "cudaEventElapsedTime(GEMM tuning)", where);
      ms[live[run % live.size()]].push_back(x);
    }
    std::erase_if(live, [&](size_t i) { return failed[i]; });
    if (live.empty()) {
      check(last_failure, "cublasLtMatmul (every one of " + std::to_string(n) + " candidates)", &t);
    }
    const int timed_ok = static_cast<int>(live.size());
    for (size_t i : live) {
      std::sort(ms[i].begin(), ms[i].end());
      c.candidate_ms[i] = ms[i][ms[i].size() / 2];
      if (c.chosen_ms < 0 || c.candidate_ms[i] < c.chosen_ms) {
        c.chosen_ms = c.candidate_ms[i];
        p.chosen = i;
      }
    }
    c.chosen = static_cast<int>(p.chosen);
    c.timed = true;
    if (timed_ok < static_cast<int>(n)) {
      c.note += (c.note.empty() ? "" : "; ") + std::to_string(static_cast<int>(n) - timed_ok) +
                " of " + std::to_string(n) +
                " candidates failed (last: " + cublasLtGetStatusName(last_failure) + ")";
    }
    ++tunings;
    if (log_choices()) {
      std::string line = "cgemm: tuned " + problem_str(t) + ": candidate ms";
      for (size_t i = 0; i < n; ++i) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), " %s%.4f", i == p.chosen ? "*" : "", c.candidate_ms[i]);
        line += buf;
      }
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }

  static int algo_id(const cublasLtMatmulAlgo_t& algo) {
    int id = -1;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id),
                                             &written) != CUBLAS_STATUS_SUCCESS) {
      return -1;
    }
    return id;
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

    Plan* plan = nullptr;
    {
      const std::lock_guard<std::mutex> lock(mu);
      auto it = plans.find(key);
      if (it == plans.end()) it = plans.emplace(key, std::make_unique<Plan>()).first;
      plan = it->second.get();  // never erased before destruction: stays valid unlocked
    }
    Plan& p = *plan;
    void* ws = workspace_for(stream);
    if (!p.ready.load(std::memory_order_acquire)) {
      // First call for the key: one thread builds and tunes (a failure leaves the plan unready
      // and the next call tries again); the others with the same key wait for its choice.
      const std::lock_guard<std::mutex> lock(p.mu);
      if (!p.ready.load(std::memory_order_relaxed)) {
        build(p, t, key);
        if (p.fused_bias) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, t.bias, t);
        tune(p, t, key, stream, ws);
        p.choice.algo_id = algo_id(p.candidates[p.chosen].algo);
        p.ready.store(true, std::memory_order_release);
      }
    }
    if (p.fused_bias) {
      // The bias pointer lives in the shared descriptor: set and launch as one step.
      const std::lock_guard<std::mutex> lock(p.mu);
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, t.bias, t);
      check(matmul(p, p.chosen, t, t.out, ws, stream), "cublasLtMatmul", &t);
    } else {
      check(matmul(p, p.chosen, t, t.out, ws, stream), "cublasLtMatmul", &t);
    }
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
  s.fast_accum = !env_flag(env::kFp8HighPrecisionAccumulation).value_or(false);
  s.autotune = autotune_from_env();
  s.candidates = candidates_from_env(s.where);
  int l2 = 0;
  check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s.device),
             "cudaDeviceGetAttribute(L2 cache size)", s.where);
  s.l2_bytes = static_cast<size_t>(std::max(l2, 0));
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

size_t CublasLtGemm::cached_problems() const {
  const std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = 0;
  for (const auto& [key, plan] : impl_->plans) {
    if (plan->ready.load(std::memory_order_acquire)) ++n;
  }
  return n;
}

bool CublasLtGemm::autotune() const { return impl_->autotune; }

int CublasLtGemm::candidates() const { return impl_->candidates; }

int CublasLtGemm::tunings() const { return impl_->tunings.load(); }

std::vector<GemmChoice> CublasLtGemm::choices() const {
  const std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<GemmChoice> out;
  for (const auto& [key, plan] : impl_->plans) {
    // A ready plan's choice never changes; one being built is left out.
    if (plan->ready.load(std::memory_order_acquire)) out.push_back(plan->choice);
  }
  return out;
}

std::string CublasLtGemm::describe_choices() const {
  auto ms = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.4f ms", v);
    return std::string(buf);
  };
  std::string s;
  for (const GemmChoice& c : choices()) {
    s += c.problem + ": heuristic #" + std::to_string(c.chosen + 1) + " of " +
         std::to_string(c.candidates) + " (algo id " + std::to_string(c.algo_id) + ")";
    if (c.timed) {
      s += ", " + ms(c.chosen_ms);
      if (c.chosen != 0) {
        s += c.candidate_ms[0] >= 0 ? " (heuristic #1: " + ms(c.candidate_ms[0]) + ")"
                                    : " (heuristic #1 failed)";
      }
    }
    if (!c.note.empty()) s += "; " + c.note;
    s += "\n";
  }
  return s;
}

std::string CublasLtGemm::version() {
  const size_t v = cublasLtGetVersion();
  return "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

}  // namespace cgemm
