#pragma once
// What the backend's kernel files share (cuda_kernels.cu, quantize_kernels.cu): the launch
// shape of grid-stride kernels, the stale-error rule, and element loads and stores by kind.
// Included only by .cu files; everything is internal to each of them.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/dtype.hpp"

namespace cgemm::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any GPU several times over; grid-stride loops cover the rest.
constexpr int64_t kMaxBlocks = 4096;

unsigned blocks_for(int64_t work) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// cudaGetLastError() after a launch also returns an earlier call's non-sticky error (a failed
// IPC open, a query's cudaErrorNotReady) that its caller has handled already: clear it first.
void clear_stale_error() { static_cast<void>(cudaGetLastError()); }

__device__ __forceinline__ int64_t first_index() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Element kinds: 0 = fp32, 1 = bf16, 2 = fp16; -1 for other dtypes.
int kind_of(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 0;
    case DType::kBFloat16:
      return 1;
    case DType::kFloat16:
      return 2;
    default:
      return -1;
  }
}

template <int kKind>
__device__ __forceinline__ float load(const void* p, int64_t i) {
  if constexpr (kKind == 0) {
    return static_cast<const float*>(p)[i];
  } else if constexpr (kKind == 1) {
    return numeric::bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  } else {
    return numeric::fp16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
}
template <int kKind>
__device__ __forceinline__ void store(void* p, int64_t i, float v) {
  if constexpr (kKind == 0) {
    static_cast<float*>(p)[i] = v;
  } else if constexpr (kKind == 1) {
    static_cast<uint16_t*>(p)[i] = numeric::float_to_bf16(v);
  } else {
    static_cast<uint16_t*>(p)[i] = numeric::float_to_fp16(v);
  }
}

}  // namespace
}  // namespace cgemm::cuda
