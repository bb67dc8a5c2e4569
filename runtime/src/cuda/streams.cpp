// The CUDA backend's streams and the events that order them (see streams.hpp).

#include "streams.hpp"

#include <algorithm>
#include <utility>

#include "cgemm/core/cuda_check.hpp"

namespace cgemm::cuda {

int cuda_priority(int option, int least, int greatest) {
  return std::min(greatest + std::max(option, 0), least);
}

Streams::Streams(int count, int compute_priority, int communication_priority, std::string where)
    : where_(std::move(where)),
      compute_priority_(compute_priority),
      communication_priority_(communication_priority) {
  check(cudaDeviceGetStreamPriorityRange(&priority_least_, &priority_greatest_),
        "cudaDeviceGetStreamPriorityRange");
  // Non-blocking streams: no implicit ordering with the legacy default stream, which libraries
  // and user code may use.
  const int compute_prio = cuda_priority(compute_priority, priority_least_, priority_greatest_);
  const int comm_prio = cuda_priority(communication_priority, priority_least_, priority_greatest_);
  for (int i = 0; i < count; ++i) {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, compute_prio),
          "cudaStreamCreateWithPriority(compute stream " + std::to_string(i) + ")");
    streams_.push_back(s);
  }
  check(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, comm_prio),
        "cudaStreamCreateWithPriority(communication stream)");
  for (size_t i = 0; i <= streams_.size(); ++i) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    stream_events_.push_back(e);
  }
  check(cudaEventCreateWithFlags(&after_event_, cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  check(cudaEventCreateWithFlags(&external_event_, cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  for (size_t i = 0; i <= streams_.size(); ++i) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    external_done_.push_back(e);
  }
}

Streams::~Streams() {
  // The owner has synchronized the device. Errors are ignored: a destructor cannot report them.
  for (cudaEvent_t e : stream_events_) cudaEventDestroy(e);
  if (after_event_ != nullptr) cudaEventDestroy(after_event_);
  if (external_event_ != nullptr) cudaEventDestroy(external_event_);
  for (cudaEvent_t e : external_done_) cudaEventDestroy(e);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
}

void Streams::check(cudaError_t rc, const std::string& call) const { check_cuda(rc, call, where_); }

cudaStream_t Streams::at(int s, const char* call) const {
  if (s < 0 || s >= static_cast<int>(streams_.size())) {
    throw Error(where_ + ": " + call + ": stream " + std::to_string(s) + " out of range (" +
                std::to_string(streams_.size()) + " compute streams)");
  }
  return streams_[static_cast<size_t>(s)];
}

void Streams::gather_into_main() {
  for (size_t i = 1; i <= streams_.size(); ++i) {
    cudaStream_t s = i < streams_.size() ? streams_[i] : comm_stream_;
    check(cudaEventRecord(stream_events_[i], s), "cudaEventRecord(join)");
    check(cudaStreamWaitEvent(streams_[0], stream_events_[i], 0), "cudaStreamWaitEvent(join)");
  }
}

void Streams::fork_from_main() {
  check(cudaEventRecord(stream_events_[0], streams_[0]), "cudaEventRecord(fork)");
  for (size_t i = 1; i <= streams_.size(); ++i) {
    cudaStream_t s = i < streams_.size() ? streams_[i] : comm_stream_;
    check(cudaStreamWaitEvent(s, stream_events_[0], 0), "cudaStreamWaitEvent(fork)");
  }
}

void Streams::join_into(int s) {
  cudaStream_t target = at(s, "join_streams");
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (static_cast<int>(i) == s) continue;
    check(cudaEventRecord(stream_events_[i], streams_[i]), "cudaEventRecord(join)");
    check(cudaStreamWaitEvent(target, stream_events_[i], 0), "cudaStreamWaitEvent(join)");
  }
}

void Streams::communication_after(int s) {
  check(cudaEventRecord(after_event_, at(s, "start_exchange")),
        "cudaEventRecord(exchange dependency)");
  check(cudaStreamWaitEvent(comm_stream_, after_event_, 0),
        "cudaStreamWaitEvent(exchange dependency)");
}

void Streams::communication_after_all() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    check(cudaEventRecord(stream_events_[i], streams_[i]), "cudaEventRecord(collective)");
    check(cudaStreamWaitEvent(comm_stream_, stream_events_[i], 0),
          "cudaStreamWaitEvent(collective)");
  }
}

void Streams::main_after(cudaStream_t external) {
  const cudaError_t rc = cudaEventRecord(external_event_, external);
  if (rc != cudaSuccess) {
    int device = -1;
    cudaGetDevice(&device);
    check(rc,
          "cudaEventRecord(the caller's stream) (the stream passed to execute must be a "
          "valid stream of this backend's device, GPU " +
              std::to_string(device) + ")");
  }
  check(cudaStreamWaitEvent(streams_[0], external_event_, 0),
        "cudaStreamWaitEvent(stream 0 after the caller's stream)");
}

void Streams::external_after_all(cudaStream_t external) {
  // Each stream's own event (not stream_events_, which join_into and the others reuse): the
  // caller's stream waits on every stream directly, so the plan's streams keep their order.
  for (size_t i = 0; i <= streams_.size(); ++i) {
    cudaStream_t s = i < streams_.size() ? streams_[i] : comm_stream_;
    check(cudaEventRecord(external_done_[i], s), "cudaEventRecord(end of the call)");
    check(cudaStreamWaitEvent(external, external_done_[i], 0),
          "cudaStreamWaitEvent(the caller's stream after the call)");
  }
}

std::string Streams::describe() const {
  return "streams: " + std::to_string(streams_.size()) + " compute (priority " +
         std::to_string(compute_priority_) + " -> CUDA " +
         std::to_string(cuda_priority(compute_priority_, priority_least_, priority_greatest_)) +
         "), 1 communication (priority " + std::to_string(communication_priority_) + " -> CUDA " +
         std::to_string(
             cuda_priority(communication_priority_, priority_least_, priority_greatest_)) +
         "; CUDA range " + std::to_string(priority_greatest_) + " highest .. " +
         std::to_string(priority_least_) + ")\n";
}

}  // namespace cgemm::cuda
