// The CUDA backend's elementwise kernels. All are grid-stride loops over 64-bit indices, so
// any size runs with a bounded grid; element conversions go through cgemm/core/convert.hpp, so
// rounding is the CPU backend's, bit for bit.

#include <cuda_runtime.h>

#include <algorithm>

#include "cgemm/core/convert.hpp"
#include "cuda_kernels.hpp"
#include "kernel_common.cuh"

namespace cgemm::cuda {
namespace {
// The value a float takes once stored as kKind: the sum is rounded to the output dtype before
// the bias is added, as gemm.py reduces in the output dtype and then does output += bias.
template <int kKind>
__device__ __forceinline__ float round_to(float v) {
  if constexpr (kKind == 0) {
    return v;
  } else if constexpr (kKind == 1) {
    return numeric::bf16_to_float(numeric::float_to_bf16(v));
  } else {
    return numeric::fp16_to_float(numeric::float_to_fp16(v));
  }
}

// --- fill_normal ---

struct FillDims {
  int nd;
  int64_t local[kMaxFillDims];
  int64_t global_stride[kMaxFillDims];  // elements between neighbours along dim d of `global`
  int64_t offset[kMaxFillDims];
};

template <int kKind>
__global__ void fill_normal_kernel(void* dst, FillDims d, int64_t count, uint64_t seed, float std) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    int64_t rem = i;
    int64_t flat = 0;
    for (int k = d.nd - 1; k >= 0; --k) {
      const int64_t idx = rem % d.local[k];
      rem /= d.local[k];
      flat += (d.offset[k] + idx) * d.global_stride[k];
    }
    store<kKind>(dst, i, numeric::normal_value(seed, static_cast<uint64_t>(flat), std));
  }
}

// --- fill_pattern ---

template <typename T>
__global__ void fill_pattern_kernel(T* dst, T pattern, int64_t count) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) dst[i] = pattern;
}

// --- reorder ---

// Whole blocks of m trailing rows move; within a block bytes keep their order. The word type
// W is the widest that divides the block size and both base addresses.
template <typename W, bool kTpspLeading>
__global__ void reorder_kernel(const W* src, W* dst, int64_t outer, int64_t tpsp,
                               int64_t words_per_block) {
  const int64_t total = outer * tpsp * words_per_block;
  for (int64_t i = first_index(); i < total; i += grid_stride()) {
    const int64_t ob = i / words_per_block;
    const int64_t w = i - ob * words_per_block;
    int64_t sb;
    if constexpr (kTpspLeading) {
      // out (t, r) <- in (r, t): in viewed as [outer, tpsp] blocks, out as [tpsp, outer].
      const int64_t t = ob / outer;
      const int64_t r = ob - t * outer;
      sb = r * tpsp + t;
    } else {
      // out (r, t) <- in (t, r): in viewed as [tpsp, outer] blocks, out as [outer, tpsp].
      const int64_t r = ob / tpsp;
      const int64_t t = ob - r * tpsp;
      sb = t * outer + r;
    }
    dst[i] = src[sb * words_per_block + w];
  }
}

template <typename W>
cudaError_t launch_reorder_words(ReorderKind kind, int64_t outer, int64_t tpsp, size_t block_bytes,
                                 const void* src, void* dst, cudaStream_t stream) {
  const int64_t words = static_cast<int64_t>(block_bytes / sizeof(W));
  const unsigned blocks = blocks_for(outer * tpsp * words);
  if (kind == ReorderKind::kTpspLeading) {
    reorder_kernel<W, true><<<blocks, kThreads, 0, stream>>>(
        static_cast<const W*>(src), static_cast<W*>(dst), outer, tpsp, words);
  } else {
    reorder_kernel<W, false><<<blocks, kThreads, 0, stream>>>(
        static_cast<const W*>(src), static_cast<W*>(dst), outer, tpsp, words);
  }
  return cudaGetLastError();
}

// --- sum_partials ---

struct Parts {
  const void* p[kMaxParts];
  int n;
};

template <int kPart, int kOut>
__global__ void sum_partials_kernel(Parts parts, int64_t count, const void* bias, int64_t bias_len,
                                    void* out) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    // Fixed order p = 0..n-1, one fp32 accumulator, as the CPU backend sums.
    float acc = 0.0f;
    for (int p = 0; p < parts.n; ++p) acc += load<kPart>(parts.p[p], i);
    if (bias != nullptr) acc = round_to<kOut>(acc) + load<kOut>(bias, i % bias_len);
    store<kOut>(out, i, acc);
  }
}

// The same sum, 8 consecutive elements per thread with 16-byte loads and stores (the final
// pass of a reduce-scatter is memory-bound; load_vec / store_vec in kernel_common.cuh). Same
// order of additions, so the same bits.
// kUnroll vectors per thread and iteration, loaded before any is used: one 16-byte load in
// flight per thread is too little to cover memory latency at full bandwidth.
constexpr int kUnroll = 4;

template <int kPart, int kOut>
__global__ void sum_partials_vec_kernel(Parts parts, int64_t vectors, const void* bias,
                                        int64_t bias_len, void* out) {
  const int64_t stride = grid_stride();
  for (int64_t base = first_index(); base < vectors; base += stride * kUnroll) {
    float acc[kUnroll][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[u][k] = 0.0f;
    }
    for (int p = 0; p < parts.n; ++p) {
      float x[kUnroll][kVec] = {};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (base + u * stride < vectors) load_vec<kPart>(parts.p[p], base + u * stride, x[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[u][k] += x[u][k];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + u * stride;
      if (v >= vectors) break;
      if (bias != nullptr) {
        int64_t j = (v * kVec) % bias_len;
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          acc[u][k] = round_to<kOut>(acc[u][k]) + load<kOut>(bias, j);
          if (++j == bias_len) j = 0;
        }
      }
      store_vec<kOut>(out, v, acc[u]);
    }
  }
}

template <int kPart, int kOut>
void launch_sum(bool vec, const Parts& parts, int64_t count, const void* bias, int64_t bias_len,
                void* out, cudaStream_t stream) {
  if (vec) {
    sum_partials_vec_kernel<kPart, kOut>
        <<<blocks_for((count / kVec + kUnroll - 1) / kUnroll), kThreads, 0, stream>>>(
            parts, count / kVec, bias, bias_len, out);
  } else {
    sum_partials_kernel<kPart, kOut>
        <<<blocks_for(count), kThreads, 0, stream>>>(parts, count, bias, bias_len, out);
  }
}

template <int kPart>
cudaError_t launch_sum_for_out(int out_kind, const Parts& parts, int64_t count, const void* bias,
                               int64_t bias_len, void* out, cudaStream_t stream) {
  bool vec = count % kVec == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0;
  for (int p = 0; p < parts.n; ++p) vec = vec && reinterpret_cast<uintptr_t>(parts.p[p]) % 16 == 0;
  switch (out_kind) {
    case 0:
      launch_sum<kPart, 0>(vec, parts, count, bias, bias_len, out, stream);
      break;
    case 1:
      launch_sum<kPart, 1>(vec, parts, count, bias, bias_len, out, stream);
      break;
    case 2:
      launch_sum<kPart, 2>(vec, parts, count, bias, bias_len, out, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                               const Shape& offset, uint64_t seed, float std, cudaStream_t stream) {
  clear_stale_error();
  const int nd = static_cast<int>(local.size());
  if (nd > kMaxFillDims || global.size() != local.size() || offset.size() != local.size()) {
    return cudaErrorInvalidValue;
  }
  FillDims d{};
  d.nd = nd;
  int64_t stride = 1;
  int64_t count = 1;
  for (int k = nd - 1; k >= 0; --k) {
    const auto u = static_cast<size_t>(k);
    d.local[u] = local[u];
    d.offset[u] = offset[u];
    d.global_stride[u] = stride;
    stride *= global[u];
    count *= local[u];
  }
  if (count == 0) return cudaSuccess;
  const unsigned blocks = blocks_for(count);
  switch (kind_of(dtype)) {
    case 0:
      fill_normal_kernel<0><<<blocks, kThreads, 0, stream>>>(dst, d, count, seed, std);
      break;
    case 1:
      fill_normal_kernel<1><<<blocks, kThreads, 0, stream>>>(dst, d, count, seed, std);
      break;
    case 2:
      fill_normal_kernel<2><<<blocks, kThreads, 0, stream>>>(dst, d, count, seed, std);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_fill_pattern(void* dst, size_t element_bytes, uint32_t pattern, int64_t count,
                                cudaStream_t stream) {
  clear_stale_error();
  if (count <= 0) return cudaSuccess;
  const unsigned blocks = blocks_for(count);
  switch (element_bytes) {
    case 1:
      fill_pattern_kernel<uint8_t><<<blocks, kThreads, 0, stream>>>(
          static_cast<uint8_t*>(dst), static_cast<uint8_t>(pattern), count);
      break;
    case 2:
      fill_pattern_kernel<uint16_t><<<blocks, kThreads, 0, stream>>>(
          static_cast<uint16_t*>(dst), static_cast<uint16_t>(pattern), count);
      break;
    case 4:
      fill_pattern_kernel<uint32_t>
          <<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(dst), pattern, count);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_reorder(ReorderKind kind, int64_t outer, int64_t tpsp, size_t block_bytes,
                           const void* src, void* dst, cudaStream_t stream) {
  clear_stale_error();
  if (outer <= 0 || tpsp <= 0 || block_bytes == 0) return cudaSuccess;
  const auto aligned = [&](size_t w) {
    return block_bytes % w == 0 && reinterpret_cast<uintptr_t>(src) % w == 0 &&
           reinterpret_cast<uintptr_t>(dst) % w == 0;
  };
  if (aligned(16))
    return launch_reorder_words<uint4>(kind, outer, tpsp, block_bytes, src, dst, stream);
  if (aligned(8))
    return launch_reorder_words<uint2>(kind, outer, tpsp, block_bytes, src, dst, stream);
  if (aligned(4)) {
    return launch_reorder_words<uint32_t>(kind, outer, tpsp, block_bytes, src, dst, stream);
  }
  if (aligned(2)) {
    return launch_reorder_words<uint16_t>(kind, outer, tpsp, block_bytes, src, dst, stream);
  }
  return launch_reorder_words<uint8_t>(kind, outer, tpsp, block_bytes, src, dst, stream);
}

cudaError_t launch_sum_partials(const void* const* parts, int num_parts, DType part_dtype,
                                int64_t count, const void* bias, int64_t bias_len, void* out,
                                DType out_dtype, cudaStream_t stream) {
  clear_stale_error();
  if (num_parts < 0 || num_parts > kMaxParts || (bias != nullptr && bias_len <= 0)) {
    return cudaErrorInvalidValue;
  }
  if (count <= 0) return cudaSuccess;
  Parts p{};
  p.n = num_parts;
  for (int i = 0; i < num_parts; ++i) p.p[i] = parts[i];
  const int out_kind = kind_of(out_dtype);
  switch (kind_of(part_dtype)) {
    case 0:
      return launch_sum_for_out<0>(out_kind, p, count, bias, bias_len, out, stream);
    case 1:
      return launch_sum_for_out<1>(out_kind, p, count, bias, bias_len, out, stream);
    case 2:
      return launch_sum_for_out<2>(out_kind, p, count, bias, bias_len, out, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// --- max_partials: the copy-engine all-reduce's max (the amaxes of current scaling) ---

__global__ void max_partials_kernel(Parts parts, int64_t count, float* out) {
  for (int64_t i = first_index(); i < count; i += grid_stride()) {
    float m = static_cast<const float*>(parts.p[0])[i];
    for (int p = 1; p < parts.n; ++p) m = fmaxf(m, static_cast<const float*>(parts.p[p])[i]);
    out[i] = m;
  }
}

cudaError_t launch_max_partials(const float* const* parts, int num_parts, int64_t count, float* out,
                                cudaStream_t stream) {
  clear_stale_error();
  if (num_parts < 1 || num_parts > kMaxParts) return cudaErrorInvalidValue;
  if (count <= 0) return cudaSuccess;
  Parts p{};
  p.n = num_parts;
  for (int i = 0; i < num_parts; ++i) p.p[i] = parts[i];
  const int threads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<int64_t>((count + threads - 1) / threads, 1024));
  max_partials_kernel<<<blocks, threads, 0, stream>>>(p, count, out);
  return cudaGetLastError();
}

__global__ void spin_kernel(uint64_t nanoseconds) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

cudaError_t launch_spin(uint64_t nanoseconds, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(nanoseconds);
  return cudaGetLastError();
}

}  // namespace cgemm::cuda
