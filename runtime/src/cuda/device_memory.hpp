#pragma once
// The CUDA backend's memory: plain device buffers, the registry of live symmetric buffers
// (attached to every transport offered to their group when made, detached before they are
// freed), and the synchronous copies to and from the host (counted: a test's proof that a path
// makes none).

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cgemm/collective/group.hpp"
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
  /// `offered[group_index(g)]`: every transport a symmetric buffer of group g must be attached
  /// to. `exchanges` names what a host wait is stuck behind.
  DeviceMemory(std::array<std::vector<Transport*>, kGroups.size()> offered, ExchangeFifo& exchanges,
               std::string where)
      : offered_(std::move(offered)), exchanges_(exchanges), where_(std::move(where)) {}
  /// Frees the plain buffers still allocated (the owner has synchronized the device).
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* allocate(size_t bytes);
  void release(void* p) noexcept;
  /// Collective over `group` (through its transports' attach).
  SymmetricBuffer allocate_symmetric(size_t bytes, Group group);
  void release_symmetric(SymmetricBuffer& b) noexcept;
  /// Whether `b` is a live symmetric buffer of this registry (the same id and address).
  bool is_live(const SymmetricBuffer& b) const;
  /// Detaches and frees every symmetric buffer without waiting: for the owner's destructor,
  /// after it synchronized the device and before the transports go.
  void release_all_symmetric() noexcept;

  /// Synchronous, like the CPU backend: the copy sees every result issued before it.
  void copy_to_host(void* host_dst, const void* src, size_t bytes);
  void copy_from_host(void* dst, const void* host_src, size_t bytes);
  /// copy_to_host calls so far.
  int64_t copies_to_host() const { return copies_to_host_; }

 private:
  void check(cudaError_t rc, const std::string& call) const;

  std::array<std::vector<Transport*>, kGroups.size()> offered_;
  ExchangeFifo& exchanges_;
  std::string where_;
  struct Live {
    SymmetricBuffer buffer;
    Group group = Group::kTp;
  };
  std::map<int, Live> symmetric_;  // live symmetric buffers by id
  int64_t copies_to_host_ = 0;
  int next_symmetric_id_ = 0;
  std::set<void*> allocations_;
};

}  // namespace cgemm::cuda
