#include <cuda_runtime.h>

#include "tile_scales.hpp"

namespace cgemm::grouped {
namespace {

__device__ __forceinline__ float at(const float* base, int64_t g, int64_t stride) {
  return *reinterpret_cast<const float*>(reinterpret_cast<const char*>(base) + g * stride);
}

// One block per tile (grid-stride over tiles): its group's product once, then N stores.
__global__ void fill_tile_alpha_kernel(float* alpha, const int32_t* tile_groups, int64_t tiles,
                                       int64_t n, const float* lhs, const float* rhs,
                                       int64_t stride) {
  for (int64_t i = blockIdx.x; i < tiles; i += gridDim.x) {
    const int64_t g = tile_groups[i];
    const float a = at(lhs, g, stride) * at(rhs, g, stride);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) alpha[i * n + j] = a;
  }
}

}  // namespace

cudaError_t launch_fill_tile_alpha(float* alpha, const int32_t* tile_groups, int64_t tiles,
                                   int64_t n, const float* lhs_scale_inv,
                                   const float* rhs_scale_inv, int64_t scale_stride,
                                   cudaStream_t stream) {
  if (tiles <= 0 || n <= 0) return cudaSuccess;
  // So that cudaGetLastError below names this launch, not an earlier handled failure.
  static_cast<void>(cudaGetLastError());
  const unsigned blocks = static_cast<unsigned>(tiles < 65536 ? tiles : 65536);
  fill_tile_alpha_kernel<<<blocks, 256, 0, stream>>>(alpha, tile_groups, tiles, n, lhs_scale_inv,
                                                     rhs_scale_inv, scale_stride);
  return cudaGetLastError();
}

}  // namespace cgemm::grouped
