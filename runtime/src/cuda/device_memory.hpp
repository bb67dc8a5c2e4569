#pragma once
// The CUDA backend's memory: plain device buffers, the registry of live symmetric buffers
// (attached to every offered transport when made, detached before they are freed), and the
// synchronous copies to and from the host.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cgemm/collective/transport.hpp"
#include "exchange_fifo.hpp"

namespace cgemm::cuda {

inline std::string bytes_str(size_t bytes) { return std::to_string(bytes) + " bytes"; }

/// dst = src on `st`, device to device, unless there is nothing to move (no bytes, or dst is
/// src); not traced. `what` names the copy in the error, prefixed with `where`.
void copy_async(void* dst, const void* src, size_t bytes, cudaStream_t st, const char* what,
                std::string_view where);

class DeviceMemory {
 public:
  /// `offered`: every transport a symmetric buffer must be attached to. `exchanges` names what
  /// a host wait is stuck behind.
  DeviceMemory(std::vector<Transport*> offered, ExchangeFifo& exchanges, std::string where)
      : offered_(std::move(offered)), exchanges_(exchanges), where_(std::move(where)) {}
  /// Frees the plain buffers still allocated (the owner has synchronized the device).
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* allocate(size_t bytes);
  void release(void* p) noexcept;
  /// Collective over the TP group (through the transports' attach).
  SymmetricBuffer allocate_symmetric(size_t bytes);
  void release_symmetric(SymmetricBuffer& b) noexcept;
  /// Whether `b` is a live symmetric buffer of this registry (the same id and address).
  bool is_live(const SymmetricBuffer& b) const;
  /// Detaches and frees every symmetric buffer without waiting: for the owner's destructor,
  /// after it synchronized the device and before the transports go.
  void release_all_symmetric() noexcept;

  /// Synchronous, like the CPU backend: the copy sees every result issued before it.
  void copy_to_host(void* host_dst, const void* src, size_t bytes);
  void copy_from_host(void* dst, const void* host_src, size_t bytes);

 private:
  void check(cudaError_t rc, const std::string& call) const;

  std::vector<Transport*> offered_;
  ExchangeFifo& exchanges_;
  std::string where_;
  std::map<int, SymmetricBuffer> symmetric_;  // live symmetric buffers by id
  int next_symmetric_id_ = 0;
  std::set<void*> allocations_;
};

}  // namespace cgemm::cuda
