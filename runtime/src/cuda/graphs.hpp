#pragma once
// The CUDA backend's graphs (Backend::capture_graph): a call's work captured from the caller's
// stream into a CUDA graph, instantiated once, launched on each replay. The plan's own streams
// join the capture through the events that order them in any call (Streams: the caller's stream
// forks into stream 0 and every stream joins back into it), so the graph holds the plan's whole
// multi-stream schedule.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace cgemm::cuda {

class Graphs {
 public:
  explicit Graphs(std::string where) : where_(std::move(where)) {}
  ~Graphs();
  Graphs(const Graphs&) = delete;
  Graphs& operator=(const Graphs&) = delete;

  /// Captures `issue` from `stream` (cudaStreamCaptureModeThreadLocal: another thread's unsafe
  /// call, such as the watchdog's event queries, does not end it), instantiates the graph and
  /// returns its id. The stream must be a created stream, not the legacy or per-thread default
  /// one, and not capturing already. When `issue` throws, the capture is ended and discarded and
  /// the exception goes on.
  int64_t capture(cudaStream_t stream, const std::function<void()>& issue);
  /// Launches graph `id` on `stream`.
  void replay(int64_t id, cudaStream_t stream);
  void release(int64_t id) noexcept;

 private:
  void check(cudaError_t rc, const std::string& call) const;

  std::string where_;
  std::map<int64_t, cudaGraphExec_t> graphs_;
  int64_t next_ = 0;
};

}  // namespace cgemm::cuda
