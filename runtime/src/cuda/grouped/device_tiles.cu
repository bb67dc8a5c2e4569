// The device tiles runner's kernels (device_tiles.hpp).

#include <cuda_runtime.h>

#include "device_tiles.hpp"
#include "grouped_bias.hpp"

namespace cgemm::grouped {
namespace {

constexpr int kThreads = 256;

// One block: thread 0 runs the prefix over the G sizes (G is small: a few hundred experts at
// most), then every thread writes its share of the F + G entries, each entry once.
__global__ void plan_kernel(DeviceTilesCall c) {
  __shared__ int bad;
  __shared__ int32_t used_full;
  const int64_t t_rows = c.tile_rows;
  if (threadIdx.x == 0) {
    int64_t end = 0;
    int32_t full = 0;
    int32_t neg = -1;
    for (int64_t g = 0; g < c.groups; ++g) {
      const int32_t s = c.sizes[g];
      if (s < 0 && neg < 0) neg = static_cast<int32_t>(g);
      c.full_before[g] = full;
      if (s > 0) {
        end += s;
        full += static_cast<int32_t>(s / t_rows);
      }
      c.row_ends[g] = end < c.m_total ? end : c.m_total;  // in bounds whatever the sizes
    }
    const bool ok = neg < 0 && end <= c.m_total;  // rows past the sum: padding
    c.status->bad = ok ? 0 : 1;
    if (!ok) {
      // Calls run one at a time (the runner's stream order): a plain count is enough. The
      // host may read at any time: the sequence lock of device_tiles.hpp.
      const uint32_t seq = c.status->seq += 2;
      volatile DeviceSizesStatus* h = c.host_status;
      h->seq = seq - 1;
      __threadfence_system();
      h->negative_group = neg;
      h->negative_size = neg >= 0 ? c.sizes[neg] : 0;
      h->sum = end;
      __threadfence_system();
      h->seq = seq;
    }
    bad = ok ? 0 : 1;
    used_full = ok ? full : 0;
  }
  __syncthreads();
  const auto* lhs = static_cast<const char*>(c.lhs);
  const auto* rhs = static_cast<const char*>(c.rhs);
  auto* out = static_cast<char*>(c.out);
  auto* scratch = static_cast<char*>(c.scratch);
  const int64_t e = c.elem_bytes;
  const int64_t lhs_row = c.k * e, out_row = c.n * e, rhs_group = c.k * c.n * e;
  char* spare = scratch + c.groups * t_rows * out_row;
  for (int64_t i = threadIdx.x; i < c.full_entries + c.groups; i += blockDim.x) {
    const void* a = rhs;
    const void* b = lhs;
    void* d = spare;
    if (i < used_full) {
      // The group whose whole tiles hold entry i: the last g with full_before[g] <= i.
      int64_t lo = 0, hi = c.groups - 1;
      while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (c.full_before[mid] <= i) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      const int64_t first = (lo > 0 ? c.row_ends[lo - 1] : 0) + (i - c.full_before[lo]) * t_rows;
      a = rhs + lo * rhs_group;
      b = lhs + first * lhs_row;
      d = out + first * out_row;
    } else if (i >= c.full_entries && !bad) {
      const int64_t g = i - c.full_entries;
      const int64_t start = g > 0 ? c.row_ends[g - 1] : 0;
      const int64_t rest = (c.row_ends[g] - start) % t_rows;
      a = rhs + g * rhs_group;
      d = scratch + g * t_rows * out_row;
      if (rest > 0) {
        const int64_t p = c.row_ends[g] - rest;
        const int64_t w = p < c.m_total - t_rows ? p : c.m_total - t_rows;
        b = lhs + w * lhs_row;
      }
    }
    c.a[i] = a;
    c.b[i] = b;
    c.d[i] = d;
  }
}

template <typename T>
__global__ void tile_bias_kernel(T* scratch, const T* bias, int64_t groups, int64_t t_rows,
                                 int64_t n) {
  for (int64_t r = blockIdx.x; r < groups * t_rows; r += gridDim.x) {
    const T* b = bias + (r / t_rows) * n;
    T* o = scratch + r * n;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) o[j] = b[j];
  }
}

// Blocks (g, y): group g's rest rows, y-strided; every block also zeroes its share of the
// padding rows past the sizes' sum (no group owns them). With bad sizes, every block fills its
// share of out with `nan` instead.
template <typename T>
__global__ void scatter_kernel(DeviceTilesCall c, T nan) {
  T* out = static_cast<T*>(c.out);
  const int64_t n = c.n, t_rows = c.tile_rows;
  const int64_t blocks = static_cast<int64_t>(gridDim.x) * gridDim.y;
  const int64_t block = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  if (c.status->bad != 0) {
    for (int64_t i = block * blockDim.x + threadIdx.x; i < c.m_total * n;
         i += blocks * blockDim.x) {
      out[i] = nan;
    }
    return;
  }
  const int64_t padding = c.row_ends[c.groups - 1] * n;  // the first padding element
  for (int64_t i = padding + block * blockDim.x + threadIdx.x; i < c.m_total * n;
       i += blocks * blockDim.x) {
    out[i] = T(0);
  }
  const int64_t g = blockIdx.x;
  const int64_t start = g > 0 ? c.row_ends[g - 1] : 0;
  const int64_t rest = (c.row_ends[g] - start) % t_rows;
  if (rest == 0) return;
  const int64_t p = c.row_ends[g] - rest;
  const int64_t w = p < c.m_total - t_rows ? p : c.m_total - t_rows;
  const T* tile = static_cast<const T*>(c.scratch) + g * t_rows * n;
  for (int64_t j = blockIdx.y; j < rest; j += gridDim.y) {
    const T* src = tile + (p - w + j) * n;
    T* dst = out + (p + j) * n;
    for (int64_t col = threadIdx.x; col < n; col += blockDim.x) dst[col] = src[col];
  }
}

unsigned capped(int64_t v, int64_t cap) {
  return static_cast<unsigned>(v < 1 ? 1 : (v < cap ? v : cap));
}

}  // namespace

cudaError_t launch_device_tiles_plan(const DeviceTilesCall& c, cudaStream_t stream) {
  if (c.groups <= 0 || c.tile_rows <= 0) return cudaErrorInvalidValue;
  static_cast<void>(cudaGetLastError());  // so that the answer names this launch
  plan_kernel<<<1, kThreads, 0, stream>>>(c);
  return cudaGetLastError();
}

cudaError_t launch_device_tiles_bias(const DeviceTilesCall& c, const void* bias, DType dtype,
                                     cudaStream_t stream) {
  cudaError_t rc =
      launch_fill_group_bias(c.out, bias, c.row_ends, c.groups, c.m_total, c.n, dtype, stream);
  if (rc != cudaSuccess) return rc;
  const unsigned blocks = capped(c.groups * c.tile_rows, 65536);
  if (c.elem_bytes == 2) {
    tile_bias_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(c.scratch),
                                                      static_cast<const uint16_t*>(bias), c.groups,
                                                      c.tile_rows, c.n);
  } else {
    tile_bias_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(c.scratch),
                                                      static_cast<const uint32_t*>(bias), c.groups,
                                                      c.tile_rows, c.n);
  }
  return cudaGetLastError();
}

cudaError_t launch_device_tiles_scatter(const DeviceTilesCall& c, DType dtype,
                                        cudaStream_t stream) {
  static_cast<void>(cudaGetLastError());
  // G blocks wide, enough rows per group to keep the copy parallel (a rest is < T rows).
  const dim3 grid(static_cast<unsigned>(c.groups), capped(c.tile_rows, 32));
  switch (dtype) {
    case DType::kBFloat16:
      scatter_kernel<<<grid, kThreads, 0, stream>>>(c, static_cast<uint16_t>(0x7FC0));
      break;
    case DType::kFloat16:
      scatter_kernel<<<grid, kThreads, 0, stream>>>(c, static_cast<uint16_t>(0x7E00));
      break;
    case DType::kFloat32:
      scatter_kernel<<<grid, kThreads, 0, stream>>>(c, static_cast<uint32_t>(0x7FC00000u));
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace cgemm::grouped
