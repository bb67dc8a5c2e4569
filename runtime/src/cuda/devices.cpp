// The GPUs this process sees (see devices.hpp).

#include "devices.hpp"

#include <utility>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/runtime/backends.hpp"

namespace cgemm {

namespace cuda {

cudaDeviceProp open_device(int device, const std::string& where) {
  int count = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess || count == 0) {
    throw Error(where + ": " + std::string("no usable GPU: cudaGetDeviceCount ") +
                (rc != cudaSuccess ? std::string("failed: ") + cudaGetErrorName(rc) + " (" +
                                         cudaGetErrorString(rc) + ")"
                                   : std::string("found none")));
  }
  if (device < 0 || device >= count) {
    throw Error(where + ": GPU " + std::to_string(device) + " asked for, but this process sees " +
                std::to_string(count));
  }
  check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")", where);
  cudaDeviceProp props{};
  check_cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties", where);
  return props;
}

}  // namespace cuda

int cuda_device_count() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for later calls
    return 0;
  }
  return count;
}

bool cuda_backend_built() { return true; }
bool cuda_backend_available() { return cuda_device_count() > 0; }

std::vector<std::string> cuda_device_uuids() {
  std::vector<std::string> out;
  const int count = cuda_device_count();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      cudaGetLastError();
      return {};  // a GPU this process cannot query is no GPU for the backend rule
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id;
    for (const char c : p.uuid.bytes) {
      const auto b = static_cast<unsigned char>(c);
      id += kHex[b >> 4];
      id += kHex[b & 15];
    }
    out.push_back(std::move(id));
  }
  return out;
}

}  // namespace cgemm
