#pragma once
// Pinned host staging for the CUDA grouped runners (cublas_grouped.cpp, cublaslt_tiles.cpp):
// each call writes its pointer arrays on the host and moves them to the device in one
// asynchronous copy. A ring of slots lets the host run kSlots calls ahead of the device; a
// slot is rewritten only after an event says its previous copy has left it (a wait per
// kSlots calls at most, never one per group). Private to runtime/.

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <string>

namespace cgemm::grouped {

class StagingRing {
 public:
  static constexpr size_t kSlots = 4;
  /// Every slot starts at a multiple of this many bytes (as cudaMalloc's own alignment): the
  /// pointer arrays in a slot are read by the device as 8-byte words (16 for some kernels), and
  /// a caller's slot size need not be a multiple of either (the tiles runner's 28 bytes a tile
  /// for an odd tile count left slot 1 at 4 bytes past an 8-byte boundary).
  static constexpr size_t kSlotAlign = 256;

  /// kSlots slots of `slot_bytes` each (rounded up to kSlotAlign), pinned on the host and on
  /// the current device, for copies on `stream`. Throws cgemm::Error (prefixed by `where`) when
  /// memory is short.
  StagingRing(size_t slot_bytes, cudaStream_t stream, std::string where);
  ~StagingRing();  // waits for the slots' copies and stream's work that may read them
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  struct Slot {
    char* host = nullptr;
    char* device = nullptr;
    size_t index = 0;
  };
  /// The next slot, once its previous copy has left it.
  Slot acquire();
  /// Copies the slot's first `bytes` to the device on the stream, ordered before what the
  /// stream runs next.
  void commit(const Slot& slot, size_t bytes);
  size_t slot_bytes() const { return slot_bytes_; }  // rounded up to kSlotAlign

 private:
  void release() noexcept;

  size_t slot_bytes_;
  cudaStream_t stream_;
  std::string where_;
  void* host_ = nullptr;    // pinned, kSlots slots
  void* device_ = nullptr;  // the same slots on the device
  std::array<cudaEvent_t, kSlots> copied_{};
  std::array<bool, kSlots> pending_{};
  size_t turn_ = 0;
};

}  // namespace cgemm::grouped
