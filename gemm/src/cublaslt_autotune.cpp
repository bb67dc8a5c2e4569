#include "cublaslt_autotune.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "candidate_tuner.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/env.hpp"

namespace cgemm::detail {
namespace {

// CGEMM_GEMM_LOG=1: print every tuning's candidate times (the chosen one starred) to stderr.
bool log_choices() {
  static const bool on = env_flag(env::kGemmLog).value_or(false);
  return on;
}

// Stream-ordered device scratch, freed in stream order on every exit path.
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

// The candidates' runs on the real problem, on the call's stream: each timed run has its own
// pair of events, so the L2 clearing before it is not timed; the host waits once, at the end.
class LtCandidateRunner final : public CandidateRunner {
 public:
  LtCandidateRunner(const LtContext& ctx, const LtPlan& plan, const GemmTask& t, void* out,
                    void* ws, cudaStream_t stream, size_t l2_bytes, GemmChoice& choice)
      : ctx_(ctx),
        plan_(plan),
        t_(t),
        desc_(ctx, t, plan.fused_bias),
        out_(out),
        ws_(ws),
        stream_(stream),
        l2_bytes_(l2_bytes),
        choice_(choice) {}

  cublasStatus_t last_failure() const { return last_failure_; }

  bool warm_up(size_t candidate) override { return matmul(candidate); }

  void prepare(size_t runs) override {
    // Each timed run starts with a cold L2 (as Triton's do_bench clears it): a stream-ordered
    // scratch of twice the L2 is overwritten before the run, outside its events, so a
    // candidate is not chosen for inputs that the previous run left in the cache. Without the
    // scratch (no memory) the runs are timed warm, and the choice says so.
    flush_bytes_ = 2 * l2_bytes_;
    if (flush_bytes_ > 0) {
      if (cudaMallocAsync(&flush_.p, flush_bytes_, stream_) == cudaSuccess) {
        flush_.stream = stream_;
      } else {
        static_cast<void>(cudaGetLastError());  // handled: timed with a warm L2
        flush_.p = nullptr;
        flush_bytes_ = 0;
        choice_.note = "L2 not cleared between timed runs (no scratch memory)";
      }
    }
    ev_.e.reserve(2 * runs);
    for (size_t i = 0; i < 2 * runs; ++i) {
      cudaEvent_t e = nullptr;
      check_cuda(cudaEventCreate(&e), "cudaEventCreate(GEMM tuning)", ctx_.where);
      ev_.e.push_back(e);
    }
    recorded_.assign(runs, false);
  }

  bool timed_run(size_t run, size_t candidate) override {
    if (flush_.p != nullptr) {
      check_cuda(cudaMemsetAsync(flush_.p, static_cast<int>(run & 1), flush_bytes_, stream_),
                 "cudaMemsetAsync(GEMM tuning: clear the L2)", ctx_.where);
    }
    check_cuda(cudaEventRecord(ev_.e[2 * run], stream_), "cudaEventRecord(GEMM tuning)",
               ctx_.where);
    const bool ok = matmul(candidate);
    check_cuda(cudaEventRecord(ev_.e[2 * run + 1], stream_), "cudaEventRecord(GEMM tuning)",
               ctx_.where);
    recorded_[run] = true;
    last_recorded_ = run;
    return ok;
  }

  std::vector<double> elapsed_ms() override {
    std::vector<double> ms(recorded_.size(), -1.0);
    if (recorded_.empty()) return ms;
    check_cuda(cudaEventSynchronize(ev_.e[2 * last_recorded_ + 1]),
               "cudaEventSynchronize(GEMM tuning) after " + problem_str(t_), ctx_.where);
    for (size_t run = 0; run < recorded_.size(); ++run) {
      if (!recorded_[run]) continue;
      float x = 0;
      check_cuda(cudaEventElapsedTime(&x, ev_.e[2 * run], ev_.e[2 * run + 1]),
                 "cudaEventElapsedTime(GEMM tuning)", ctx_.where);
      ms[run] = x;
    }
    return ms;
  }

 private:
  bool matmul(size_t candidate) {
    const cublasStatus_t st = launch(ctx_, plan_, desc_, candidate, t_, out_, ws_, stream_);
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    last_failure_ = st;
    static_cast<void>(cudaGetLastError());  // a failed launch's non-sticky error: handled
    return false;
  }

  const LtContext& ctx_;
  const LtPlan& plan_;
  const GemmTask& t_;
  CallDesc desc_;
  void* out_;
  void* ws_;
  cudaStream_t stream_;
  size_t l2_bytes_;
  GemmChoice& choice_;
  cublasStatus_t last_failure_ = CUBLAS_STATUS_SUCCESS;
  Scratch flush_;
  size_t flush_bytes_ = 0;
  Events ev_;
  std::vector<bool> recorded_;
  size_t last_recorded_ = 0;
};

// Why the candidates cannot be timed on `stream` (empty: they can).
std::string why_untimed(const TuneSettings& settings, size_t candidates, cudaStream_t stream) {
  if (!settings.autotune) return "not timed: CGEMM_GEMM_AUTOTUNE=0";
  if (candidates < 2) return "not timed: the heuristic offered one candidate";
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (const cudaError_t rc = cudaStreamIsCapturing(stream, &capture); rc != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // handled: no timing
    return std::string("not timed: cudaStreamIsCapturing failed: ") + cudaGetErrorName(rc);
  }
  if (capture != cudaStreamCaptureStatusNone) {
    return "not timed: the stream was being captured into a CUDA graph";
  }
  return {};
}

void log_tuning(const GemmTask& t, const LtPlan& p) {
  std::string line = "cgemm: tuned " + problem_str(t) + ": candidate ms";
  for (size_t i = 0; i < p.choice.candidate_ms.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), " %s%.4f", i == p.chosen ? "*" : "", p.choice.candidate_ms[i]);
    line += buf;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

bool choose_algorithm(LtPlan& p, const LtContext& ctx, const TuneSettings& settings,
                      const GemmTask& t, const PlanKey& key, cudaStream_t stream, void* ws) {
  GemmChoice& c = p.choice;
  const size_t n = p.candidates.size();
  c.chosen = 0;
  c.timed = false;
  c.chosen_ms = -1;
  c.candidate_ms.assign(n, -1.0);
  p.chosen = 0;
  if (std::string why = why_untimed(settings, n, stream); !why.empty()) {
    c.note = std::move(why);
    return false;
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
      return false;
    }
    scratch.p = s;
    scratch.stream = stream;
    if (alignment_of(s) < key.align_out) {
      c.note = "not timed: the scratch output is less aligned than the output";
      return false;
    }
    // Defined values for C (they do not change the timing; garbage might be NaN/Inf).
    check_cuda(cudaMemsetAsync(s, 0, bytes, stream), "cudaMemsetAsync(tuning scratch)", ctx.where);
    out = s;
  }

  LtCandidateRunner runner(ctx, p, t, out, ws, stream, settings.l2_bytes, c);
  const Tuning tuning = time_candidates(n, CublasLtGemm::kTimedRuns, runner);
  if (!tuning.ok) {
    ctx.check(runner.last_failure(),
              "cublasLtMatmul (every one of " + std::to_string(n) + " candidates)", &t);
  }
  p.chosen = tuning.chosen;
  c.candidate_ms = tuning.median_ms;
  c.chosen_ms = tuning.median_ms[tuning.chosen];
  c.chosen = static_cast<int>(p.chosen);
  c.timed = true;
  if (tuning.failed > 0) {
    c.note += (c.note.empty() ? "" : "; ") + std::to_string(tuning.failed) + " of " +
              std::to_string(n) +
              " candidates failed (last: " + cublasLtGetStatusName(runner.last_failure()) + ")";
  }
  if (log_choices()) log_tuning(t, p);
  return true;
}

}  // namespace cgemm::detail
