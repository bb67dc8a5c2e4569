#pragma once
// The GPUs this process sees: the listing of backends.hpp (cuda_device_count,
// cuda_device_uuids) and the opening of the one a CUDA backend runs on.

#include <cuda_runtime_api.h>

#include <string>

namespace cgemm::cuda {

/// Makes GPU `device` current and returns its properties. Throws, prefixed with `where`, when
/// this process sees no GPU or not that one.
cudaDeviceProp open_device(int device, const std::string& where);

}  // namespace cgemm::cuda
