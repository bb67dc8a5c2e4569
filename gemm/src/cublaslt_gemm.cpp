#include "cgemm/gemm/cublaslt_gemm.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <unordered_map>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/core/scaling_modes.hpp"
#include "cublaslt_autotune.hpp"
#include "cublaslt_kernels.hpp"
#include "cublaslt_plan.hpp"

namespace cgemm {

using detail::LtPlan;
using detail::PlanKey;
using detail::problem_str;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// CGEMM_GEMM_AUTOTUNE: on unless set to a false flag (0 / off / false / no).
bool autotune_from_env() { return env_flag(env::kGemmAutotune).value_or(true); }

int candidates_from_env(const std::string& where) {
  const long long n = env_int(env::kGemmCandidates).value_or(CublasLtGemm::kDefaultCandidates);
  if (n < 1 || n > CublasLtGemm::kMaxCandidates) {
    throw Error((where.empty() ? "" : where + ": ") + "CGEMM_GEMM_CANDIDATES=" + std::to_string(n) +
                ": must be 1.." + std::to_string(CublasLtGemm::kMaxCandidates));
  }
  return static_cast<int>(n);
}

int algo_id(const cublasLtMatmulAlgo_t& algo) {
  int id = -1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id),
                                           &written) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return id;
}

}  // namespace

struct CublasLtGemm::Impl {
  // One cached problem. Built and tuned once under `mu`; read-only, and read without a lock,
  // once `ready` is set (the call's pointers live in the call's own descriptor).
  struct Entry {
    std::mutex mu;  // held while building and tuning only
    std::atomic<bool> ready{false};
    LtPlan plan;
  };

  detail::LtContext ctx;
  detail::TuneSettings tune;
  int device = 0;
  int cc = 0;
  mutable std::mutex mu;  // guards `workspaces` and `entries` (the map, not the entries)
  std::unordered_map<cudaStream_t, void*> workspaces;
  std::map<PlanKey, std::unique_ptr<Entry>> entries;
  std::atomic<int> tunings{0};

  void* workspace_for(cudaStream_t stream) {
    const std::lock_guard<std::mutex> lock(mu);
    auto it = workspaces.find(stream);
    if (it != workspaces.end()) return it->second;
    void* p = nullptr;
    const cudaError_t rc = cudaMalloc(&p, ctx.workspace);
    if (rc != cudaSuccess) {
      throw_cuda_error(
          rc, "cudaMalloc(cuBLASLt workspace, " + std::to_string(ctx.workspace) + " bytes)",
          ctx.where);
    }
    workspaces.emplace(stream, p);
    return p;
  }

  Entry& entry_for(const PlanKey& key) {
    const std::lock_guard<std::mutex> lock(mu);
    auto it = entries.find(key);
    if (it == entries.end()) it = entries.emplace(key, std::make_unique<Entry>()).first;
    return *it->second;  // never erased before destruction: stays valid unlocked
  }

  void validate(const GemmTask& t) const {
    auto fail = [&](const std::string& why) {
      std::string msg;
      if (!ctx.where.empty()) msg.append(ctx.where).append(": ");
      throw Error(msg + "invalid " + problem_str(t) + ": " + why);
    };
    if (t.m < 0 || t.n < 0 || t.k < 0 || t.batch < 0) fail("negative size");
    validate_dtypes(t, fail);
    if (t.k == 0) fail("k = 0 (an empty contraction) is not supported by cuBLASLt");
    if (t.lhs == nullptr || t.rhs == nullptr || t.out == nullptr) fail("null operand pointer");
    if (t.lhs_transposed ? t.lda < t.m : t.lda < t.k) {
      fail(t.lhs_transposed ? "lda < m" : "lda < k");
    }
    if (t.ldb < (t.rhs_transposed ? t.k : t.n)) fail("ldb < row length of rhs");
    if (t.ldc < t.n) fail("ldc < n");
    if (t.batch > INT32_MAX) fail("batch exceeds cuBLASLt's int32 batch count");
    if (t.batch > 1 && (t.lhs_batch_stride < 0 || t.out_batch_stride < 0)) {
      fail("negative batch stride");
    }
  }

  // The seed's rules for quantized operands (gemm.py's _compatible_fp8_gemm_dtypes,
  // assert_cublas_requirements and the Hopper layout check), and the plain dtypes' rule.
  template <typename Fail>
  void validate_dtypes(const GemmTask& t, Fail&& fail) const {
    const DType lhs = t.in_dtype, rhs = t.rhs_type();
    const auto narrow = [](DType d) { return is_fp8(d) || d == DType::kFloat4E2M1; };
    if (!narrow(lhs) && !narrow(rhs)) {
      if (t.block_scaling != BlockScaling::kTensor) fail("block scaling needs quantized inputs");
      if (rhs != lhs) fail("lhs and rhs dtypes differ (only FP8 operands may)");
      if (t.out_dtype != t.in_dtype && t.out_dtype != DType::kFloat32) {
        fail("out dtype must be the in dtype or float32");
      }
      return;
    }
    if (const ScalingModeRow& row = block_scaling_row(t.block_scaling); !row.cuda_kernels) {
      const std::string mode(row.label);
      const int need = row.cuda_min_compute_capability;
      if (cc < need) {
        fail(mode + " block scaling needs compute capability " + std::to_string(need / 10) + "." +
             std::to_string(need % 10) + "; this GPU is " + std::to_string(cc / 10) + "." +
             std::to_string(cc % 10));
      }
      fail(mode + " block scaling is not implemented on cuBLASLt here (the CPU backend runs it)");
    }
    if (lhs == DType::kFloat4E2M1 || rhs == DType::kFloat4E2M1) {
      fail("float4_e2m1fn operands need NVFP4 block scaling");
    }
    const bool e4m3_lhs = lhs == DType::kFloat8E4M3, e4m3_rhs = rhs == DType::kFloat8E4M3;
    if (!(is_fp8(lhs) && is_fp8(rhs) && (e4m3_lhs || e4m3_rhs))) {
      fail("cuBLAS GEMM quantized operands have incompatible data types: " +
           std::string(dtype_name(lhs)) + " x " + std::string(dtype_name(rhs)) +
           " (FP8 pairs: e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3)");
    }
    if (t.k % 16 != 0) {
      fail("the contracting dimension must be a multiple of 16 with quantized inputs, got k=" +
           std::to_string(t.k));
    }
    if (cc < 100 && (t.lhs_transposed || !t.rhs_transposed)) {
      fail(
          "FP8 GEMMs on compute capability < 10.0 (Hopper) need a non-transposed lhs [m, k] and "
          "a transposed rhs stored [n, k] (contracting_dims ((-1,), (-1,)))");
    }
    if (t.out_dtype != DType::kBFloat16 && t.out_dtype != DType::kFloat16 &&
        t.out_dtype != DType::kFloat32) {
      fail("quantized inputs give bfloat16, float16 or float32 out (no 8-bit outputs), got " +
           std::string(dtype_name(t.out_dtype)));
    }
  }

  // Batch blocks that follow each other row after row are one taller GEMM: same rhs, and
  // cuBLASLt runs one big problem faster than a batch of small ones. A transposed lhs [k, m]
  // has its m in the columns, so its blocks do not stack into a taller one.
  static void fold_batch(GemmTask& t) {
    if (t.batch > 1 && !t.lhs_transposed && t.lhs_batch_stride == t.m * t.lda &&
        t.out_batch_stride == t.m * t.ldc) {
      t.m *= t.batch;
      t.batch = 1;
    }
    if (t.batch == 1) {
      t.lhs_batch_stride = 0;
      t.out_batch_stride = 0;
    }
  }

  void run(GemmTask t, cudaStream_t stream) {
    validate(t);
    if (t.m == 0 || t.n == 0 || t.batch == 0) return;
    fold_batch(t);
    const PlanKey key = detail::plan_key(t);
    Entry& e = entry_for(key);
    LtPlan& p = e.plan;
    void* ws = workspace_for(stream);
    if (!e.ready.load(std::memory_order_acquire)) {
      // First call for the key: one thread builds and tunes (a failure leaves the entry unready
      // and the next call tries again); the others with the same key wait for its choice.
      const std::lock_guard<std::mutex> lock(e.mu);
      if (!e.ready.load(std::memory_order_relaxed)) {
        detail::build_plan(p, ctx, t, key);
        if (detail::choose_algorithm(p, ctx, tune, t, key, stream, ws)) ++tunings;
        p.choice.algo_id = algo_id(p.candidates[p.chosen].algo);
        e.ready.store(true, std::memory_order_release);
      }
    }
    detail::CallDesc desc(ctx, t, p.fused_bias);
    ctx.check(detail::launch(ctx, p, desc, p.chosen, t, t.out, ws, stream), "cublasLtMatmul", &t);
    if (t.bias != nullptr && !p.fused_bias) {
      const cudaError_t rc = detail::launch_add_bias(t.out, t.bias, t.out_dtype, t.batch, t.m, t.n,
                                                     t.ldc, t.out_batch_stride, stream);
      if (rc != cudaSuccess) throw_cuda_error(rc, "bias kernel after " + problem_str(t), ctx.where);
    }
  }
};

CublasLtGemm::CublasLtGemm(std::string where) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.ctx.where = std::move(where);
  const std::string& at = s.ctx.where;
  check_cuda(cudaGetDevice(&s.device), "cudaGetDevice", at);
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, s.device),
             "cudaDeviceGetAttribute(compute capability)", at);
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, s.device),
             "cudaDeviceGetAttribute(compute capability)", at);
  s.cc = major * 10 + minor;
  s.ctx.cc = s.cc;
  s.ctx.workspace = (major >= 9 ? 32 : 4) * kMiB;
  // Transformer Engine's switch: high-precision (split) accumulation means no fast accumulation.
  // A task's own fast_accumulation decides (the planner sets it from the same variable).
  s.ctx.fast_accum = !fp8_gemm_high_precision_accumulation();
  // The scale_inv of an FP8 operand a task gives none of (GemmTask: null means 1): cuBLASLt
  // reads scales through device pointers, so a constant one lives on the device.
  {
    void* one = nullptr;
    check_cuda(cudaMalloc(&one, sizeof(float)), "cudaMalloc(cuBLASLt unit scale)", at);
    s.ctx.one = static_cast<const float*>(one);
    const float value = 1.0f;
    check_cuda(cudaMemcpy(one, &value, sizeof(value), cudaMemcpyHostToDevice),
               "cudaMemcpy(cuBLASLt unit scale)", at);
  }
  s.tune.autotune = autotune_from_env();
  s.ctx.candidates = candidates_from_env(at);
  int l2 = 0;
  check_cuda(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s.device),
             "cudaDeviceGetAttribute(L2 cache size)", at);
  s.tune.l2_bytes = static_cast<size_t>(std::max(l2, 0));
  s.ctx.check(cublasLtCreate(&s.ctx.handle), "cublasLtCreate", nullptr);
}

CublasLtGemm::~CublasLtGemm() {
  if (!impl_) return;
  impl_->entries.clear();
  // Queued GEMMs may still use a workspace, and their streams may be gone already: wait for
  // the whole device before freeing.
  if (!impl_->workspaces.empty()) cudaDeviceSynchronize();
  for (auto& [stream, p] : impl_->workspaces) cudaFree(p);
  if (impl_->ctx.one != nullptr) {
    cudaDeviceSynchronize();  // a queued FP8 GEMM may still read it
    cudaFree(const_cast<float*>(impl_->ctx.one));
  }
  if (impl_->ctx.handle != nullptr) cublasLtDestroy(impl_->ctx.handle);
}

void CublasLtGemm::add_stream(cudaStream_t stream) { impl_->workspace_for(stream); }

void CublasLtGemm::run(const GemmTask& task, cudaStream_t stream) { impl_->run(task, stream); }

size_t CublasLtGemm::workspace_bytes() const { return impl_->ctx.workspace; }

bool CublasLtGemm::fp8_fast_accumulation() const { return impl_->ctx.fast_accum; }

size_t CublasLtGemm::cached_problems() const {
  const std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = 0;
  for (const auto& [key, e] : impl_->entries) {
    if (e->ready.load(std::memory_order_acquire)) ++n;
  }
  return n;
}

bool CublasLtGemm::autotune() const { return impl_->tune.autotune; }

int CublasLtGemm::candidates() const { return impl_->ctx.candidates; }

int CublasLtGemm::tunings() const { return impl_->tunings.load(); }

std::vector<GemmChoice> CublasLtGemm::choices() const {
  const std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<GemmChoice> out;
  for (const auto& [key, e] : impl_->entries) {
    // A ready plan's choice never changes; one being built is left out.
    if (e->ready.load(std::memory_order_acquire)) out.push_back(e->plan.choice);
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
