#pragma once
// Pinned host staging for the CUDA grouped runners (cublas_grouped.cpp, cublaslt_tiles.cpp):
// each call writes its pointer arrays on the host and moves them to the device in one
// asynchronous copy. A ring of slots lets the host run kSlots calls ahead of the device; a
// slot is rewritten only after an event says the call that used it last is done, its copy and
// the GEMMs that read the device copy both (a wait per kSlots calls at most, never one per
// group): calls may come on different streams, so stream order alone cannot protect the
// device copy. Private to the CUDA backend.

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
  /// the current device. Throws cgemm::Error (prefixed by `where`) when memory is short.
  StagingRing(size_t slot_bytes, std::string where);
  ~StagingRing();  // waits for the calls that used the slots
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  struct Slot {
    char* host = nullptr;
    char* device = nullptr;
    size_t index = 0;
  };
  /// The next slot, once the call that used it last is done.
  Slot acquire();
  /// Copies the slot's first `bytes` to the device on `stream`, ordered before what the
  /// stream runs next.
  void commit(const Slot& slot, size_t bytes, cudaStream_t stream);
  /// Marks the slot in use until the work issued so far on `stream` (the call's GEMMs) is done.
  void done(const Slot& slot, cudaStream_t stream);
  size_t slot_bytes() const { return slot_bytes_; }  // rounded up to kSlotAlign

 private:
  void release() noexcept;

  size_t slot_bytes_;
  std::string where_;
  void* host_ = nullptr;                    // pinned, kSlots slots
  void* device_ = nullptr;                  // the same slots on the device
  std::array<cudaEvent_t, kSlots> used_{};  // recorded after the slot's call
  std::array<bool, kSlots> pending_{};
  size_t turn_ = 0;
};

}  // namespace cgemm::grouped
