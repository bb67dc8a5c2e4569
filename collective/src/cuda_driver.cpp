// The transports' CUDA driver calls (see cuda_driver.hpp).

#include "cuda_driver.hpp"

#include <cuda_runtime_api.h>

#include "cgemm/core/error.hpp"

namespace cgemm::detail {
namespace {

template <typename Fn>
void lookup(const char* name, unsigned version, Fn& fn, std::string& missing) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t rc =
      cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &status);
  if (rc != cudaSuccess || status != cudaDriverEntryPointSuccess || p == nullptr) {
    if (!missing.empty()) missing += ", ";
    missing += name;
    return;
  }
  fn = reinterpret_cast<Fn>(p);
}

}  // namespace

const CudaDriver& cuda_driver() {
  static const CudaDriver d = [] {
    CudaDriver x;
    lookup("cuGetErrorName", 6000, x.get_error_name, x.missing);
    lookup("cuDeviceGet", 2000, x.device_get, x.missing);
    lookup("cuDeviceGetAttribute", 2000, x.device_get_attribute, x.missing);
    lookup("cuStreamWriteValue64", 11070, x.write_value64, x.missing);
    lookup("cuStreamWaitValue64", 11070, x.wait_value64, x.missing);
    return x;
  }();
  return d;
}

void check_cu(CUresult rc, const std::string& call, const std::string& where) {
  if (rc == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const CudaDriver& d = cuda_driver();
  if (d.get_error_name == nullptr || d.get_error_name(rc, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "unknown CUresult";
  }
  throw Error(where + ": " + call + " failed: " + name + " (" + std::to_string(rc) + ")");
}

std::string cuda_problem(cudaError_t rc, const std::string& call) {
  return call + " failed: " + cudaGetErrorName(rc);
}

std::string stream_memops_problem(bool* flush) {
  const CudaDriver& d = cuda_driver();
  if (!d.missing.empty()) return "CUDA driver lacks " + d.missing;
  int device = -1;
  if (const cudaError_t rc = cudaGetDevice(&device); rc != cudaSuccess) {
    return cuda_problem(rc, "cudaGetDevice");
  }
  CUdevice dev = 0;
  int memops = 0;
  if (d.device_get(&dev, device) != CUDA_SUCCESS ||
      d.device_get_attribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev) !=
          CUDA_SUCCESS) {
    return "cannot query stream memory operation support";
  }
  if (memops == 0) {
    return "GPU " + std::to_string(device) + " has no 64-bit stream memory operations";
  }
  int can_flush = 0;
  if (flush != nullptr &&
      d.device_get_attribute(&can_flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, dev) ==
          CUDA_SUCCESS) {
    *flush = can_flush != 0;
  }
  return {};
}

}  // namespace cgemm::detail
