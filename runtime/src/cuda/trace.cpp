// The CUDA backend's tracing (see trace.hpp).

#include "trace.hpp"

namespace cgemm::cuda {

Trace::~Trace() {
  // The owner has synchronized the device. Errors are ignored: a destructor cannot report them.
  for (const PendingSpan& p : pending_) {
    cudaEventDestroy(p.begin);
    cudaEventDestroy(p.end);
  }
  if (origin_ != nullptr) cudaEventDestroy(origin_);
}

void Trace::set(bool on, cudaStream_t main) {
  if (on) {
    if (origin_ == nullptr) check_cuda(cudaEventCreate(&origin_), "cudaEventCreate(trace)", where_);
    check_cuda(cudaEventRecord(origin_, main), "cudaEventRecord(trace origin)", where_);
    check_cuda(cudaEventSynchronize(origin_), "cudaEventSynchronize(trace origin)", where_);
  }
  on_ = on;
}

std::vector<TraceSpan> Trace::take() {
  std::vector<TraceSpan> out;
  for (PendingSpan& p : pending_) {
    float b = 0.0f, e = 0.0f;
    check_cuda(cudaEventElapsedTime(&b, origin_, p.begin), "cudaEventElapsedTime(trace)", where_);
    check_cuda(cudaEventElapsedTime(&e, origin_, p.end), "cudaEventElapsedTime(trace)", where_);
    out.push_back({std::move(p.name), p.category, p.lane, b, e, p.bytes, p.flops});
    cudaEventDestroy(p.begin);
    cudaEventDestroy(p.end);
  }
  pending_.clear();
  return out;
}

}  // namespace cgemm::cuda
