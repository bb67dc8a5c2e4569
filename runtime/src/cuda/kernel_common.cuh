#pragma once
// What the backend's kernel files share (cuda_kernels.cu, quantize_kernels.cu,
// train_kernels.cu): the launch shape of grid-stride kernels, the stale-error rule, and element
// loads and stores by kind, one at a time or 16 bytes at a time.
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

// kVec consecutive elements by one 16-byte access (two for fp32), for memory-bound kernels;
// v counts vectors of kVec elements, so the buffer must be 16-byte aligned.
constexpr int kVec = 8;

template <int kKind>
__device__ __forceinline__ void load_vec(const void* p, int64_t v, float (&x)[kVec]) {
  if constexpr (kKind == 0) {
    const float4* q = static_cast<const float4*>(p) + 2 * v;
    const float4 a = q[0];
    const float4 b = q[1];
    x[0] = a.x;
    x[1] = a.y;
    x[2] = a.z;
    x[3] = a.w;
    x[4] = b.x;
    x[5] = b.y;
    x[6] = b.z;
    x[7] = b.w;
  } else {
    const uint4 w = static_cast<const uint4*>(p)[v];
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // little-endian: the lower half is the earlier element
      const auto lo = static_cast<uint16_t>(words[k] & 0xffffu);
      const auto hi = static_cast<uint16_t>(words[k] >> 16);
      if constexpr (kKind == 1) {
        x[2 * k] = numeric::bf16_to_float(lo);
        x[2 * k + 1] = numeric::bf16_to_float(hi);
      } else {
        x[2 * k] = numeric::fp16_to_float(lo);
        x[2 * k + 1] = numeric::fp16_to_float(hi);
      }
    }
  }
}

template <int kKind>
__device__ __forceinline__ void store_vec(void* p, int64_t v, const float (&x)[kVec]) {
  if constexpr (kKind == 0) {
    float4* q = static_cast<float4*>(p) + 2 * v;
    q[0] = make_float4(x[0], x[1], x[2], x[3]);
    q[1] = make_float4(x[4], x[5], x[6], x[7]);
  } else {
    uint32_t words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint16_t lo =
          kKind == 1 ? numeric::float_to_bf16(x[2 * k]) : numeric::float_to_fp16(x[2 * k]);
      const uint16_t hi =
          kKind == 1 ? numeric::float_to_bf16(x[2 * k + 1]) : numeric::float_to_fp16(x[2 * k + 1]);
      words[k] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
    static_cast<uint4*>(p)[v] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

}  // namespace
}  // namespace cgemm::cuda
