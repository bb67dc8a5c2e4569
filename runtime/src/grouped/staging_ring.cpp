// StagingRing (staging_ring.hpp).

#include "staging_ring.hpp"

#include <utility>

#include "cgemm/core/cuda_check.hpp"

namespace cgemm::grouped {

StagingRing::StagingRing(size_t slot_bytes, cudaStream_t stream, std::string where)
    : slot_bytes_((slot_bytes + kSlotAlign - 1) / kSlotAlign * kSlotAlign),
      stream_(stream),
      where_(std::move(where)) {
  const size_t bytes = kSlots * slot_bytes_;
  try {
    check_cuda(cudaMallocHost(&host_, bytes),
               "cudaMallocHost(" + std::to_string(bytes) + " bytes of staging)", where_);
    check_cuda(cudaMalloc(&device_, bytes),
               "cudaMalloc(" + std::to_string(bytes) + " bytes of pointers)", where_);
    for (cudaEvent_t& e : copied_) {
      check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", where_);
    }
  } catch (...) {
    release();
    throw;
  }
}

StagingRing::~StagingRing() { release(); }

StagingRing::Slot StagingRing::acquire() {
  const size_t i = turn_++ % kSlots;
  if (pending_[i]) {
    // The copy this slot made kSlots calls ago must have left it before it is rewritten.
    check_cuda(cudaEventSynchronize(copied_[i]), "cudaEventSynchronize(staging slot)", where_);
    pending_[i] = false;
  }
  return {static_cast<char*>(host_) + i * slot_bytes_,
          static_cast<char*>(device_) + i * slot_bytes_, i};
}

void StagingRing::commit(const Slot& slot, size_t bytes) {
  check_cuda(cudaMemcpyAsync(slot.device, slot.host, bytes, cudaMemcpyHostToDevice, stream_),
             "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes of grouped GEMM pointers)",
             where_);
  check_cuda(cudaEventRecord(copied_[slot.index], stream_), "cudaEventRecord(staging slot)",
             where_);
  pending_[slot.index] = true;
}

void StagingRing::release() noexcept {
  for (cudaEvent_t& e : copied_) {
    if (e != nullptr) static_cast<void>(cudaEventSynchronize(e));
  }
  for (cudaEvent_t& e : copied_) {
    if (e != nullptr) static_cast<void>(cudaEventDestroy(e));
    e = nullptr;
  }
  // The last GEMM may still read the device pointer arrays: let the stream drain first.
  if (device_ != nullptr) {
    static_cast<void>(cudaStreamSynchronize(stream_));
    static_cast<void>(cudaFree(device_));
  }
  if (host_ != nullptr) static_cast<void>(cudaFreeHost(host_));
  device_ = host_ = nullptr;
}

}  // namespace cgemm::grouped
