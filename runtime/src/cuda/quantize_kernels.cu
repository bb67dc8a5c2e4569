// The CUDA backend's quantization kernels (see quantize_kernels.hpp). They are memory-bound
// passes measured against the device-to-device copy bandwidth, so they read 16-byte vectors
// (scalar code only at unaligned heads, tails and tile edges) and cast with the hardware's
// cvt.rn.satfinite (two elements per instruction), which rounds as float8.hpp does.

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/float8.hpp"
#include "kernel_common.cuh"
#include "quantize_kernels.hpp"

namespace cgemm::cuda {
namespace {

// true: the hardware's cvt.rn.satfinite; false: float8.hpp's software casts (the CPU backend's
// code, about 20 integer operations an element, which would make the casts compute-bound at
// H200 bandwidth). Both give the same bits; test_cuda_quantize checks the hardware against
// float8.hpp on ties, saturation, subnormals and NaN.
constexpr bool kHardwareCast = true;

template <int kKind>
__device__ __forceinline__ float half_to_float(uint32_t h) {
  return kKind == 1 ? numeric::bf16_to_float(static_cast<uint16_t>(h))
                    : numeric::fp16_to_float(static_cast<uint16_t>(h));
}

// Four consecutive elements' bits from an address aligned to four of them (8 bytes for 16-bit
// elements, 16 for fp32), loaded apart from their widening (widen4): a kernel issues all of a
// thread's loads before it widens any, since a use right after a load, or the branches of
// fp16_to_float between two loads, makes each load wait for the one before.
template <int kKind>
using Raw4 = std::conditional_t<kKind == 0, float4, uint2>;

template <int kKind>
__device__ __forceinline__ Raw4<kKind> load_raw4(const void* p, int64_t i) {
  if constexpr (kKind == 0) {
    return __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(p) + i));
  } else {
    return __ldg(reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p) + i));
  }
}

template <int kKind>
__device__ __forceinline__ void widen4(const Raw4<kKind>& v, float (&x)[4]) {
  if constexpr (kKind == 0) {
    x[0] = v.x;
    x[1] = v.y;
    x[2] = v.z;
    x[3] = v.w;
  } else {
    x[0] = half_to_float<kKind>(v.x & 0xffffu);
    x[1] = half_to_float<kKind>(v.x >> 16);
    x[2] = half_to_float<kKind>(v.y & 0xffffu);
    x[3] = half_to_float<kKind>(v.y >> 16);
  }
}

// Format kinds: 0 = e4m3, 1 = e5m2.
template <int kFmt>
__device__ __forceinline__ uint32_t cast1(float x) {
  if constexpr (kHardwareCast) {
    return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kFmt == 0 ? __NV_E4M3 : __NV_E5M2);
  } else {
    return kFmt == 0 ? numeric::float_to_e4m3(x) : numeric::float_to_e5m2(x);
  }
}

// Four casts packed little-endian: byte j is x[j]'s code.
template <int kFmt>
__device__ __forceinline__ uint32_t cast4(const float (&x)[4], float scale) {
  if constexpr (kHardwareCast) {
    constexpr __nv_fp8_interpretation_t f = kFmt == 0 ? __NV_E4M3 : __NV_E5M2;
    // __nv_cvt_float2_to_fp8x2 puts .x in the low byte (cvt's second operand).
    const uint32_t lo =
        __nv_cvt_float2_to_fp8x2(make_float2(x[0] * scale, x[1] * scale), __NV_SATFINITE, f);
    const uint32_t hi =
        __nv_cvt_float2_to_fp8x2(make_float2(x[2] * scale, x[3] * scale), __NV_SATFINITE, f);
    return lo | (hi << 16);
  } else {
    uint32_t w = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) w |= cast1<kFmt>(x[j] * scale) << (8 * j);
    return w;
  }
}

// --- amax ---

template <int kKind>
__device__ __forceinline__ float abs_max16(uint4 v) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  float m = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (kKind == 0) {
      m = fmaxf(m, fabsf(__uint_as_float(w[k])));
    } else {
      m = fmaxf(m, fabsf(half_to_float<kKind>(w[k] & 0xffffu)));
      m = fmaxf(m, fabsf(half_to_float<kKind>(w[k] >> 16)));
    }
  }
  return m;
}

// Every thread of the block passes its max; the block's max goes into *out with one atomicMax
// on the float's bits (non-negative floats order as their bits do; +0 needs no atomic: *out
// starts at 0).
__device__ __forceinline__ void block_amax_into(float m, float* out) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  __shared__ float warp_max[kThreads / 32];
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  if (warp == 0) {
    m = lane < kThreads / 32 ? warp_max[lane] : 0.0f;
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0 && m > 0.0f) atomicMax(reinterpret_cast<unsigned int*>(out), __float_as_uint(m));
  }
}

// Elements [0, head) and [head + 16-byte vectors, count) one by one, the vectors between them
// four per thread and iteration (loaded before use, so enough bytes are in flight).
template <int kKind>
__global__ void amax_kernel(const void* src, int64_t count, int64_t head, float* out) {
  constexpr int64_t kPerVec = kKind == 0 ? 4 : 8;
  constexpr int64_t kSize = kKind == 0 ? 4 : 2;
  const int64_t tid = first_index();
  const int64_t stride = grid_stride();
  const int64_t vectors = (count - head) / kPerVec;
  const auto* v = reinterpret_cast<const uint4*>(static_cast<const char*>(src) + head * kSize);
  float m = 0.0f;  // fmaxf(m, NaN) == m: NaNs are skipped
  int64_t i = tid;
  for (; i + 3 * stride < vectors; i += 4 * stride) {
    const uint4 a = __ldg(v + i), b = __ldg(v + i + stride), c = __ldg(v + i + 2 * stride),
                d = __ldg(v + i + 3 * stride);
    m = fmaxf(fmaxf(m, abs_max16<kKind>(a)), abs_max16<kKind>(b));
    m = fmaxf(fmaxf(m, abs_max16<kKind>(c)), abs_max16<kKind>(d));
  }
  for (; i < vectors; i += stride) m = fmaxf(m, abs_max16<kKind>(__ldg(v + i)));
  for (int64_t j = tid; j < head; j += stride) m = fmaxf(m, fabsf(load<kKind>(src, j)));
  for (int64_t j = head + vectors * kPerVec + tid; j < count; j += stride) {
    m = fmaxf(m, fabsf(load<kKind>(src, j)));
  }
  block_amax_into(m, out);
}

// The max of |x| over four values into m (fmaxf(m, NaN) == m: NaNs are skipped).
__device__ __forceinline__ void max_abs4(const float (&x)[4], float& m) {
#pragma unroll
  for (int j = 0; j < 4; ++j) m = fmaxf(m, fabsf(x[j]));
}

// --- update_scale ---

// Thread 0 runs the CPU backend's function. Delayed scaling reads the whole amax history
// (1024 floats by default): one thread reading it from global memory would wait a memory
// latency per few entries (tens of microseconds), so the block first stages the state in shared
// memory with coalesced loads and writes it back the same way (`staged`; else, for a history
// beyond the shared memory, thread 0 works on global memory).
__global__ void update_scale_kernel(ScaleUpdate u, int floats, bool staged) {
  extern __shared__ float staged_state[];
  const int tid = static_cast<int>(threadIdx.x);
  if (u.rule != ScaleRule::kDelayed) {
    if (tid == 0) numeric::apply_scale_update(u.state, *u.amax, u.rule, u.recipe, u.fp8_max);
    return;
  }
  float* state = u.state;
  if (staged) {
    for (int i = tid; i < floats; i += static_cast<int>(blockDim.x)) staged_state[i] = state[i];
    __syncthreads();
    state = staged_state;
  }
  if (tid == 0) {
    numeric::update_delayed_scale(state, *u.amax, u.recipe.amax_history_len, u.recipe.algo,
                                  u.fp8_max, u.recipe.margin);
  }
  if (staged) {
    __syncthreads();
    for (int i = tid; i < floats; i += static_cast<int>(blockDim.x)) u.state[i] = staged_state[i];
  }
}

// --- quantize, same layout ---

// 8 elements per vector (16 bytes of bf16/fp16, 32 of fp32 in; 8 bytes out), two vectors per
// thread and iteration; the elements past the last whole vector one by one. `vectors` is 0
// when the pointers are not aligned for vectors.
// kAmax: also max |src| into *amax (QuantizeTask::amax).
template <int kKind, int kFmt, bool kAmax>
__global__ void quantize_kernel(const void* src, int64_t count, int64_t vectors, uint8_t* dst,
                                const float* state, float* amax) {
  const float scale = __ldg(state + ScaleStateLayout::kScale);
  const int64_t stride = grid_stride();
  float m = 0.0f;
  int64_t i = first_index();
  for (; i < vectors; i += stride) {
    float a[4], b[4];
    const Raw4<kKind> ra = load_raw4<kKind>(src, 8 * i), rb = load_raw4<kKind>(src, 8 * i + 4);
    widen4<kKind>(ra, a);
    widen4<kKind>(rb, b);
    if constexpr (kAmax) {
      max_abs4(a, m);
      max_abs4(b, m);
    }
    reinterpret_cast<uint2*>(dst)[i] = make_uint2(cast4<kFmt>(a, scale), cast4<kFmt>(b, scale));
  }
  for (int64_t j = 8 * vectors + first_index(); j < count; j += stride) {
    const float x = load<kKind>(src, j);
    if constexpr (kAmax) m = fmaxf(m, fabsf(x));
    dst[j] = static_cast<uint8_t>(cast1<kFmt>(x * scale));
  }
  if constexpr (kAmax) block_amax_into(m, amax);
}

// --- quantize, transposed ---

// Bandwidth (docs/PERFORMANCE.md, one H100, 2026-12-07): 96-98% of a copy of the same bytes
// from 64 MiB up for bf16, DRAM-bound (ncu: 87% of DRAM peak). It ran at 76-79% before, for two
// reasons: each load's value was widened right after the load, so a thread's four loads ran one
// after another (see load_raw4), and the kernel took 39 registers, which fit 6 blocks an SM
// instead of 8. The launch bounds alone raised it to 84%, and issuing the loads first to 97%.
// These were no faster: a [128, 128] tile with 16-byte loads and stores, 128-row tiles with
// 8-byte stores, and walking the tiles down the column bands.
// A [64, 64] tile of src goes through shared memory as its FP8 codes, one 32-bit word per 4
// columns of a row (17 words a row: the padding word spreads the transposed reads over all 32
// banks). Load: a warp reads two whole tile rows (16 threads x 4 elements each). Store: every
// thread reads a 4 x 4 byte block (4 rows, 4 columns), transposes it in registers and writes
// 4 words, one into each of 4 output rows; a warp's store covers 4 output rows with 32
// contiguous bytes each.
constexpr int kTile = 64;

__device__ __forceinline__ void transpose4x4(const uint32_t (&w)[4], uint32_t (&o)[4]) {
  // w[i] byte j = element (row i, column j); o[j] byte i = the same element.
  const uint32_t t0 = __byte_perm(w[0], w[1], 0x5140);  // w0.b0 w1.b0 w0.b1 w1.b1
  const uint32_t t1 = __byte_perm(w[0], w[1], 0x7362);  // w0.b2 w1.b2 w0.b3 w1.b3
  const uint32_t t2 = __byte_perm(w[2], w[3], 0x5140);
  const uint32_t t3 = __byte_perm(w[2], w[3], 0x7362);
  o[0] = __byte_perm(t0, t2, 0x5410);
  o[1] = __byte_perm(t0, t2, 0x7632);
  o[2] = __byte_perm(t1, t3, 0x5410);
  o[3] = __byte_perm(t1, t3, 0x7632);
}

// The launch bounds ask for every thread an SM can hold (2048 / kThreads blocks), so at most 32
// registers a thread. Kinds 0-2 need no more than that anyway; the FP8-codes transpose would
// take 38. None of them spills.
template <int kKind, int kFmt, bool kAmax>
__global__ void __launch_bounds__(kThreads, 2048 / kThreads)
    quantize_transpose_kernel(const void* src, int64_t rows, int64_t cols, uint8_t* dst,
                              const float* state, int64_t tiles_c, int64_t tiles, bool vec_in,
                              bool vec_out, float* amax) {
  __shared__ uint32_t tile[kTile][kTile / 4 + 1];
  // kKind 3: FP8 codes in, moved as they are (no scale; `state` unread).
  const float scale = kKind == 3 ? 1.0f : __ldg(state + ScaleStateLayout::kScale);
  const int tid = static_cast<int>(threadIdx.x);
  const int m = tid & 15;  // load: the word (columns 4m .. 4m + 3) of rows tid / 16 + 16 it
  const int lane = tid & 31, warp = tid >> 5;
  // store: the block of rows 4q .. 4q + 3 and columns 4p .. 4p + 3; within a warp q spans 8
  // and p 4 values, so the word reads tile[4q + i][p] fall in 32 different banks.
  const int q = (lane & 7) + 8 * (warp & 1);
  const int p = (lane >> 3) + 4 * (warp >> 1);
  float local_amax = 0.0f;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * kTile;
    const int64_t c0 = (t % tiles_c) * kTile;
    const bool full = r0 + kTile <= rows && c0 + kTile <= cols;
    // Each path issues its four loads before it uses any loaded value (load_raw4): a use
    // between them (a widening, a shared store) would leave one load in flight a thread
    // instead of four.
    if constexpr (kKind == 3) {
      const auto* codes = static_cast<const uint8_t*>(src);
      uint32_t w[4];
      if (full && vec_in) {
#pragma unroll
        for (int it = 0; it < 4; ++it) {
          const int64_t r = r0 + (tid >> 4) + 16 * it;
          w[it] = __ldg(reinterpret_cast<const uint32_t*>(codes + r * cols + c0 + 4 * m));
        }
      } else {
#pragma unroll
        for (int it = 0; it < 4; ++it) {
          const int64_t r = r0 + (tid >> 4) + 16 * it;
          const int64_t c = c0 + 4 * m;
          w[it] = 0;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (r < rows && c + j < cols)
              w[it] |= static_cast<uint32_t>(codes[r * cols + c + j]) << (8 * j);
          }
        }
      }
#pragma unroll
      for (int it = 0; it < 4; ++it) tile[(tid >> 4) + 16 * it][m] = w[it];
    } else {
      float x[4][4];
      if (full && vec_in) {
        Raw4<kKind> v[4];
#pragma unroll
        for (int it = 0; it < 4; ++it) {
          v[it] = load_raw4<kKind>(src, (r0 + (tid >> 4) + 16 * it) * cols + c0 + 4 * m);
        }
#pragma unroll
        for (int it = 0; it < 4; ++it) widen4<kKind>(v[it], x[it]);
      } else {
#pragma unroll
        for (int it = 0; it < 4; ++it) {
          const int64_t r = r0 + (tid >> 4) + 16 * it;
          const int64_t c = c0 + 4 * m;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            x[it][j] = r < rows && c + j < cols ? load<kKind>(src, r * cols + c + j) : 0.0f;
          }
        }
      }
      if constexpr (kAmax) {  // elements past the edges are 0: no change to the max
#pragma unroll
        for (int it = 0; it < 4; ++it) max_abs4(x[it], local_amax);
      }
#pragma unroll
      for (int it = 0; it < 4; ++it) tile[(tid >> 4) + 16 * it][m] = cast4<kFmt>(x[it], scale);
    }
    __syncthreads();
    uint32_t w[4], o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = tile[4 * q + i][p];
    transpose4x4(w, o);
    const int64_t r = r0 + 4 * q;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = c0 + 4 * p + j;  // the output row
      if (full && vec_out) {
        *reinterpret_cast<uint32_t*>(dst + c * rows + r) = o[j];
      } else if (c < cols) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          if (r + b < rows) dst[c * rows + r + b] = static_cast<uint8_t>(o[j] >> (8 * b));
        }
      }
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
  if constexpr (kAmax) block_amax_into(local_amax, amax);
}

template <int kKind, int kFmt, bool kAmax>
cudaError_t launch_quantize_as(const void* src, int64_t rows, int64_t cols, uint8_t* dst,
                               bool transpose, const float* state, float* amax,
                               cudaStream_t stream) {
  const auto src_addr = reinterpret_cast<uintptr_t>(src);
  const auto dst_addr = reinterpret_cast<uintptr_t>(dst);
  if constexpr (kAmax) {
    if (const cudaError_t rc = cudaMemsetAsync(amax, 0, sizeof(float), stream); rc != cudaSuccess) {
      return rc;
    }
  }
  if constexpr (kKind == 3) {
    if (!transpose) return cudaErrorInvalidValue;  // FP8 codes are only transposed
  } else if (!transpose) {
    const int64_t count = rows * cols;
    const bool vec = src_addr % (kKind == 0 ? 16 : 8) == 0 && dst_addr % 8 == 0;
    const int64_t vectors = vec ? count / 8 : 0;
    quantize_kernel<kKind, kFmt, kAmax><<<blocks_for(vec ? vectors : count), kThreads, 0, stream>>>(
        src, count, vectors, dst, state, amax);
    return cudaGetLastError();
  }
  const int64_t tiles_r = (rows + kTile - 1) / kTile;
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t tiles = tiles_r * tiles_c;
  // Whole rows of 4 elements start aligned only when every row does (cols % 4).
  const bool vec_in = cols % 4 == 0 && src_addr % (kKind == 0 ? 16 : kKind == 3 ? 4 : 8) == 0;
  const bool vec_out = rows % 4 == 0 && dst_addr % 4 == 0;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{1} << 20));
  quantize_transpose_kernel<kKind, kFmt, kAmax><<<blocks, kThreads, 0, stream>>>(
      src, rows, cols, dst, state, tiles_c, tiles, vec_in, vec_out, amax);
  return cudaGetLastError();
}

template <int kKind, bool kAmax>
cudaError_t launch_quantize_from(const void* src, int64_t rows, int64_t cols, void* dst,
                                 DType format, bool transpose, const float* state, float* amax,
                                 cudaStream_t stream) {
  auto* out = static_cast<uint8_t*>(dst);
  switch (format) {
    case DType::kFloat8E4M3:
      return launch_quantize_as<kKind, 0, kAmax>(src, rows, cols, out, transpose, state, amax,
                                                 stream);
    case DType::kFloat8E5M2:
      return launch_quantize_as<kKind, 1, kAmax>(src, rows, cols, out, transpose, state, amax,
                                                 stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template <int kKind>
cudaError_t launch_quantize_kind(const void* src, int64_t rows, int64_t cols, void* dst,
                                 DType format, bool transpose, const float* state, float* amax,
                                 cudaStream_t stream) {
  return amax != nullptr ? launch_quantize_from<kKind, true>(src, rows, cols, dst, format,
                                                             transpose, state, amax, stream)
                         : launch_quantize_from<kKind, false>(src, rows, cols, dst, format,
                                                              transpose, state, amax, stream);
}

}  // namespace

cudaError_t launch_amax(const void* src, DType dtype, int64_t count, float* amax,
                        cudaStream_t stream) {
  clear_stale_error();
  const int kind = kind_of(dtype);
  if (kind < 0 || count < 0) return cudaErrorInvalidValue;
  if (const cudaError_t rc = cudaMemsetAsync(amax, 0, sizeof(float), stream); rc != cudaSuccess) {
    return rc;
  }
  if (count == 0) return cudaSuccess;
  const int64_t size = kind == 0 ? 4 : 2;
  const auto addr = reinterpret_cast<uintptr_t>(src);
  // Elements before the first 16-byte boundary; all of them when src is not even aligned to
  // its element size (then no vector is read).
  const int64_t head =
      addr % static_cast<uintptr_t>(size) != 0
          ? count
          : std::min<int64_t>(count, static_cast<int64_t>((16 - addr % 16) % 16) / size);
  const int64_t vectors = (count - head) / (kind == 0 ? 4 : 8);
  // At most one resident wave: every block ends in one atomicMax on the same word, and more
  // blocks than fit at once only add a tail wave. On the H200 this ran at 86-88% of the copy
  // bandwidth at 64 MiB, 20 calls timed back to back; one call timed alone is about 10 us
  // slower (the host launches a memset and the kernel).
  unsigned blocks = blocks_for(std::max<int64_t>((vectors + 3) / 4, head));
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess &&
      sms > 0) {
    blocks = std::min(blocks, static_cast<unsigned>(sms) * (2048u / kThreads));
  }
  clear_stale_error();
  switch (kind) {
    case 0:
      amax_kernel<0><<<blocks, kThreads, 0, stream>>>(src, count, head, amax);
      break;
    case 1:
      amax_kernel<1><<<blocks, kThreads, 0, stream>>>(src, count, head, amax);
      break;
    default:
      amax_kernel<2><<<blocks, kThreads, 0, stream>>>(src, count, head, amax);
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_update_scale(const ScaleUpdate& u, cudaStream_t stream) {
  clear_stale_error();
  if (u.rule != ScaleRule::kDelayed) {
    update_scale_kernel<<<1, 1, 0, stream>>>(u, 0, false);
    return cudaGetLastError();
  }
  const int64_t floats = ScaleStateLayout::floats(u.recipe.amax_history_len);
  const bool staged = floats * 4 <= 48 * 1024;  // the default dynamic shared memory limit
  update_scale_kernel<<<1, staged ? kThreads : 1, staged ? static_cast<size_t>(floats) * 4 : 0,
                        stream>>>(u, static_cast<int>(staged ? floats : 0), staged);
  return cudaGetLastError();
}

cudaError_t launch_quantize_tensor(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                                   void* dst, DType format, bool transpose, const float* state,
                                   float* amax, cudaStream_t stream) {
  clear_stale_error();
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) {
    return amax != nullptr ? cudaMemsetAsync(amax, 0, sizeof(float), stream) : cudaSuccess;
  }
  if (src_dtype == DType::kFloat8E4M3 || src_dtype == DType::kFloat8E5M2) {
    // FP8 codes transposed as they are (TE's fp8_transpose): the tiles of the quantizing
    // transpose without the cast (and without an amax: there is no source value to measure).
    if (format != src_dtype || !transpose || amax != nullptr) return cudaErrorInvalidValue;
    return launch_quantize_as<3, 0, false>(src, rows, cols, static_cast<uint8_t*>(dst), true, state,
                                           nullptr, stream);
  }
  switch (kind_of(src_dtype)) {
    case 0:
      return launch_quantize_kind<0>(src, rows, cols, dst, format, transpose, state, amax, stream);
    case 1:
      return launch_quantize_kind<1>(src, rows, cols, dst, format, transpose, state, amax, stream);
    case 2:
      return launch_quantize_kind<2>(src, rows, cols, dst, format, transpose, state, amax, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cgemm::cuda
