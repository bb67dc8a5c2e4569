#pragma once
// Timing on the GPU for Backend::time_ms: CUDA events on the main stream, with a 1 ms spin
// queued ahead of the start event (as PyTorch's and Triton's benchmarks lead with a sleep), so
// the timed work is enqueued while it runs and the timing starts on a busy GPU.

#include <cuda_runtime_api.h>

#include <string>

namespace cgemm::cuda {

class EventTimer {
 public:
  explicit EventTimer(std::string where);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  /// Queues the spin, then the start event, on `st`.
  void start(cudaStream_t st);
  /// Queues the stop event on `st`.
  void stop(cudaStream_t st);
  /// Host waits for the stop event.
  void wait();
  /// Between the start and stop events (both complete).
  double elapsed_ms() const;

 private:
  std::string where_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace cgemm::cuda
