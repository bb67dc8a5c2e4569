// Timing on the GPU (see event_timer.hpp).

#include "event_timer.hpp"

#include <utility>

#include "cgemm/core/cuda_check.hpp"
#include "cuda_kernels.hpp"

namespace cgemm::cuda {

EventTimer::EventTimer(std::string where) : where_(std::move(where)) {
  check_cuda(cudaEventCreate(&start_), "cudaEventCreate(timing)", where_);
  check_cuda(cudaEventCreate(&stop_), "cudaEventCreate(timing)", where_);
}

EventTimer::~EventTimer() {
  for (cudaEvent_t e : {start_, stop_}) {
    if (e != nullptr) cudaEventDestroy(e);
  }
}

void EventTimer::start(cudaStream_t st) {
  check_cuda(launch_spin(1000000, st), "launch_spin(timing lead)", where_);
  check_cuda(cudaEventRecord(start_, st), "cudaEventRecord(timing start)", where_);
}

void EventTimer::stop(cudaStream_t st) {
  check_cuda(cudaEventRecord(stop_, st), "cudaEventRecord(timing stop)", where_);
}

void EventTimer::wait() {
  check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize(timing stop)", where_);
}

double EventTimer::elapsed_ms() const {
  float ms = 0.0f;
  check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime", where_);
  return static_cast<double>(ms);
}

}  // namespace cgemm::cuda
