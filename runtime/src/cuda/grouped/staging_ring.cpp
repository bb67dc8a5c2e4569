// StagingRing (staging_ring.hpp).

#include "staging_ring.hpp"

#include <utility>

#include "cgemm/core/cuda_check.hpp"

namespace cgemm::grouped {

StagingRing::StagingRing(size_t slot_bytes, std::string where)
    : slot_bytes_((slot_bytes + kSlotAlign - 1) / kSlotAlign * kSlotAlign),
      where_(std::move(where)) {
  const size_t bytes = kSlots * slot_bytes_;
  try {
    check_cuda(cudaMallocHost(&host_, bytes),
               "cudaMallocHost(" + std::to_string(bytes) + " bytes of staging)", where_);
    check_cuda(cudaMalloc(&device_, bytes),
               "cudaMalloc(" + std::to_string(bytes) + " bytes of pointers)", where_);
    for (cudaEvent_t& e : used_) {
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
    // The call that used this slot kSlots calls ago must be done before it is rewritten.
    check_cuda(cudaEventSynchronize(used_[i]), "cudaEventSynchronize(staging slot)", where_);
    pending_[i] = false;
  }
  return {static_cast<char*>(host_) + i * slot_bytes_,
          static_cast<char*>(device_) + i * slot_bytes_, i};
}

void StagingRing::commit(const Slot& slot, size_t bytes, cudaStream_t stream) {
  check_cuda(cudaMemcpyAsync(slot.device, slot.host, bytes, cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes of grouped GEMM pointers)",
             where_);
  // Recorded now too, so a call that fails before done() still guards its copy.
  done(slot, stream);
}

void StagingRing::done(const Slot& slot, cudaStream_t stream) {
  // Recording again moves the event behind the later work.
  check_cuda(cudaEventRecord(used_[slot.index], stream), "cudaEventRecord(staging slot)", where_);
  pending_[slot.index] = true;
}

void StagingRing::release() noexcept {
  for (cudaEvent_t& e : used_) {
    if (e != nullptr) static_cast<void>(cudaEventSynchronize(e));
  }
  for (cudaEvent_t& e : used_) {
    if (e != nullptr) static_cast<void>(cudaEventDestroy(e));
    e = nullptr;
  }
  // Each slot's event follows the GEMMs that read its device copy (waited for above).
  if (device_ != nullptr) static_cast<void>(cudaFree(device_));
  if (host_ != nullptr) static_cast<void>(cudaFreeHost(host_));
  device_ = host_ = nullptr;
}

}  // namespace cgemm::grouped
