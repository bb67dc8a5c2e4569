#pragma once
// The CUDA backend's tracing: a pair of timing events around each traced call, on the stream
// that runs it, resolved into TraceSpans (ms since the origin) when the trace is taken. Off,
// a traced call costs one branch.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/runtime/backend.hpp"

namespace cgemm::cuda {

class Trace {
 public:
  explicit Trace(std::string where) : where_(std::move(where)) {}
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  bool on() const { return on_; }
  /// On: the origin becomes now, recorded on `main` and waited for (the caller synchronizes
  /// first, so the origin is an idle GPU's now). Off: stops recording.
  void set(bool on, cudaStream_t main);

  /// Runs `work`, which issues work on `st`; while tracing, between two events on `st`, as a
  /// span named name() in `category` on `lane` that moved `bytes` and did `flops` (TraceSpan
  /// says what they count). name() is only called while tracing.
  template <class Name, class Work>
  void span(const char* category, Name&& name, int lane, cudaStream_t st, Work&& work,
            int64_t bytes = 0, int64_t flops = 0) {
    if (!on_) {
      work();
      return;
    }
    PendingSpan p{name(), category, lane, bytes, flops, nullptr, nullptr};
    check_cuda(cudaEventCreate(&p.begin), "cudaEventCreate(trace)", where_);
    check_cuda(cudaEventCreate(&p.end), "cudaEventCreate(trace)", where_);
    check_cuda(cudaEventRecord(p.begin, st), "cudaEventRecord(trace)", where_);
    work();
    check_cuda(cudaEventRecord(p.end, st), "cudaEventRecord(trace)", where_);
    pending_.push_back(std::move(p));
  }

  /// The spans recorded since tracing was turned on or last taken (the caller synchronizes
  /// first: every event must have completed).
  std::vector<TraceSpan> take();

 private:
  struct PendingSpan {
    std::string name;
    const char* category;
    int lane;
    int64_t bytes, flops;
    cudaEvent_t begin, end;
  };

  std::string where_;
  bool on_ = false;
  cudaEvent_t origin_ = nullptr;
  std::vector<PendingSpan> pending_;
};

}  // namespace cgemm::cuda
