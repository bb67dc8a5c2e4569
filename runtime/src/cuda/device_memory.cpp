// The CUDA backend's memory (see device_memory.hpp).

#include "device_memory.hpp"

#include <algorithm>

#include "cgemm/core/cuda_check.hpp"

namespace cgemm::cuda {

void copy_async(void* dst, const void* src, size_t bytes, cudaStream_t st, const char* what,
                std::string_view where) {
  if (bytes == 0 || dst == src) return;
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st),
             std::string("cudaMemcpyAsync(") + what + ", " + bytes_str(bytes) + ")", where);
}

DeviceMemory::~DeviceMemory() {
  for (void* p : allocations_) cudaFree(p);
}

void DeviceMemory::check(cudaError_t rc, const std::string& call) const {
  check_cuda(rc, call, where_);
}

void* DeviceMemory::allocate(size_t bytes) {
  void* p = nullptr;
  // Never zero-sized, so every buffer has a distinct address (as on the CPU backend).
  check(cudaMalloc(&p, std::max<size_t>(bytes, 1)), "cudaMalloc(" + bytes_str(bytes) + ")");
  allocations_.insert(p);
  return p;
}

void DeviceMemory::release(void* p) noexcept {
  if (p != nullptr && allocations_.erase(p) != 0) cudaFree(p);  // cudaFree waits for the device
}

SymmetricBuffer DeviceMemory::allocate_symmetric(size_t bytes, Group group) {
  const std::vector<Transport*>& offered = offered_[group_index(group)];
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (rc != cudaSuccess) {
    p = nullptr;
    static_cast<void>(cudaGetLastError());  // reported below, after the collective part
  }
  const SymmetricBuffer buf{p, bytes, next_symmetric_id_++};
  // Collective even when this rank's allocation failed: the peers learn it inside attach (a
  // null buffer has no IPC handle) and every rank throws, none hangs.
  size_t attached = 0;
  try {
    for (; attached < offered.size(); ++attached) offered[attached]->attach(buf);
  } catch (const Error&) {
    for (size_t i = 0; i < attached; ++i) offered[i]->detach(buf);
    if (p != nullptr) cudaFree(p);
    if (rc != cudaSuccess) check(rc, "cudaMalloc(symmetric buffer, " + bytes_str(bytes) + ")");
    throw;
  }
  check(rc, "cudaMalloc(symmetric buffer, " + bytes_str(bytes) + ")");
  symmetric_[buf.id] = Live{buf, group};
  return buf;
}

void DeviceMemory::release_symmetric(SymmetricBuffer& b) noexcept {
  auto it = symmetric_.find(b.id);
  if (it != symmetric_.end()) {
    // In-flight exchanges may still read or write it, here or (through this rank's pushes)
    // on a peer: wait for this device before closing the peers' mappings and freeing.
    try {
      exchanges_.drain();
    } catch (const std::exception&) {
      // A transport that fails to drain opens its stream waits and forgets its groups
      // (Transport::drain), so the synchronization below ends; the failure is the next host
      // wait's to report.
    }
    const auto wait = exchanges_.host_wait("releasing a symmetric buffer", false);
    cudaDeviceSynchronize();
    for (Transport* t : offered_[group_index(it->second.group)]) t->detach(it->second.buffer);
    cudaFree(it->second.buffer.local);
    symmetric_.erase(it);
  }
  b = SymmetricBuffer{};
}

bool DeviceMemory::is_live(const SymmetricBuffer& b) const {
  auto it = symmetric_.find(b.id);
  return it != symmetric_.end() && it->second.buffer.local == b.local;
}

void DeviceMemory::release_all_symmetric() noexcept {
  for (auto& [id, s] : symmetric_) {
    for (Transport* t : offered_[group_index(s.group)]) t->detach(s.buffer);
    cudaFree(s.buffer.local);
  }
  symmetric_.clear();
}

void DeviceMemory::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  ++copies_to_host_;
  {
    const auto wait = exchanges_.host_wait("a copy to the host");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(before copy to host)");
  }
  check(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDefault),
        "cudaMemcpy(device to host, " + bytes_str(bytes) + ")");
}

void DeviceMemory::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  {
    const auto wait = exchanges_.host_wait("a copy from the host");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(before copy from host)");
  }
  check(cudaMemcpy(dst, host_src, bytes, cudaMemcpyDefault),
        "cudaMemcpy(host to device, " + bytes_str(bytes) + ")");
  // From pageable memory cudaMemcpy returns once the bytes are staged, with the DMA to `dst`
  // still queued on the legacy stream, and the backend's streams are non-blocking: they do not
  // wait for it. Seen on the H200: an all-reduce of amaxes right after this copy read the
  // buffer's previous contents. Wait for the copy to land.
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(after copy from host)");
}

}  // namespace cgemm::cuda
