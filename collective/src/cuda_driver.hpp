#pragma once
// The CUDA driver calls of the transports (stream memory operations and what they need to
// know about the device), looked up through the runtime (cudaGetDriverEntryPointByVersion)
// rather than linked: binaries that use cgemm need no libcuda.so at link time, and start, then
// skip GPU work, on machines without a driver. Only built with CUDA.

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace cgemm::detail {

struct CudaDriver {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuStreamWriteValue64_v11070 write_value64 = nullptr;
  PFN_cuStreamWaitValue64_v11070 wait_value64 = nullptr;
  std::string missing;  // the entry points not found, ", "-separated; empty when all were
};

/// Looked up once per process.
const CudaDriver& cuda_driver();

/// Throws cgemm::Error "<where>: <call> failed: <CUresult name> (<code>)" unless rc is success.
void check_cu(CUresult rc, const std::string& call, const std::string& where);

/// A pointer as the driver's stream memory operations take it (unified addressing).
inline CUdeviceptr device_address(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

/// "<call> failed: <cudaError_t name>", for the problems the transports agree on.
std::string cuda_problem(cudaError_t rc, const std::string& call);

/// Empty when the current device can run 64-bit stream memory operations, else why not.
/// `flush`, when not null, is set to CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES.
std::string stream_memops_problem(bool* flush);

}  // namespace cgemm::detail
