// Probe of 2026-12-07 (issue 42, docs/PERFORMANCE.md), second version: why the runtime's
// quantize-transpose kernel (bf16 [R, 4096] -> e4m3 [4096, R], scaled) ran at 76-79% of a copy
// in cgemm-bench while this probe's copy of it (v0) ran at a copy's speed under ncu.
// The first version (git show ab572a9:docs/data/2026-12-07-fp8-kernels/transpose_probe.cu)
// stopped at a misaligned 16-byte load in its ragged check; here the vector paths are taken only
// where the addresses allow them, as the runtime's kernel does.
//
// Variants, each checked byte for byte against the runtime's kernel:
//   prod      the runtime's kernel: cgemm::cuda::launch_quantize_tensor, linked from
//             runtime/src/cuda/quantize_kernels.cu as this checkout has it;
//   v0/N      the same algorithm ([64, 64] tiles, 8-byte loads, 4-byte stores) at N resident
//             blocks an SM (8 = full occupancy; fewer by padding each block's dynamic shared
//             memory, registers unchanged): what occupancy alone costs;
//   v0w/N     v0 with each load's bf16 widened to floats right after it, in its branch, as the
//             runtime's kernel did until 2026-12-07 (at 39 registers: 6 blocks an SM);
//   v1        [128, 128] tiles with 16-byte loads and stores;
//   prod/f16  the runtime's kernel reading the same bits as float16 (timed, not checked);
//   prod+amax the runtime's kernel measuring the amax as it casts (QuantizeTask::amax).
// The padding that holds v0 to fewer blocks also moves the shared-memory carveout (ncu), so
// v0/N is not a clean occupancy sweep.
// Timed two ways, interleaved, medians of 20 after 3 warm-up rounds, CUDA events:
//   alone     one launch between two events, the same buffers every time (the first version's
//             way, and what ncu sees);
//   batched   8 launches back to back between two events, sources and destinations rotating
//             over enough pairs to exceed twice the L2 (cgemm-bench --parts quantize's way).
// Data: normal(0, 1) bf16 (as cgemm-bench fills), scale 1. GB/s counts bytes read + written:
// 4 a bf16 element for the copy, 3 for the quantizing transpose.
// `--once NAME MIB` launches one variant once (for ncu).
// Build (run_probes.sh): nvcc -O3 -std=c++17 -arch=sm_90 -I core/include -I runtime/include
//   -I runtime/src -I gemm/include transpose_probe.cu runtime/src/cuda/quantize_kernels.cu
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda/quantize_kernels.hpp"

#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

__device__ __forceinline__ uint32_t cast2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ float bf(uint32_t h) { return __uint_as_float(h << 16); }
// Four elements (8 bytes of bf16) as one word of e4m3 codes, little-endian.
__device__ __forceinline__ uint32_t cast4(uint2 v, float s) {
  return cast2(bf(v.x & 0xffffu) * s, bf(v.x >> 16) * s) |
         (cast2(bf(v.y & 0xffffu) * s, bf(v.y >> 16) * s) << 16);
}
__device__ __forceinline__ void transpose4x4(const uint32_t* w, uint32_t* o) {
  const uint32_t t0 = __byte_perm(w[0], w[1], 0x5140);
  const uint32_t t1 = __byte_perm(w[0], w[1], 0x7362);
  const uint32_t t2 = __byte_perm(w[2], w[3], 0x5140);
  const uint32_t t3 = __byte_perm(w[2], w[3], 0x7362);
  o[0] = __byte_perm(t0, t2, 0x5410);
  o[1] = __byte_perm(t0, t2, 0x7632);
  o[2] = __byte_perm(t1, t3, 0x5410);
  o[3] = __byte_perm(t1, t3, 0x7632);
}
__device__ __forceinline__ uint16_t at(const uint16_t* s, int64_t rows, int64_t cols, int64_t r,
                                       int64_t c) {
  return r < rows && c < cols ? s[r * cols + c] : 0;
}

// v0: the runtime's algorithm (bf16 only), one [64, 64] tile per iteration. vec: the 8-byte
// loads and 4-byte stores are aligned (cols % 4 == 0, rows % 4 == 0). kWidenAtLoad: each
// loaded word is widened to floats right after its load, in the branch (the runtime's kernel
// until 2026-12-07): a use between the loads, so each waits for the one before.
template <bool kWidenAtLoad>
__global__ void __launch_bounds__(256)
    v0(const uint16_t* src, int64_t rows, int64_t cols, uint8_t* dst, const float* sp,
       int64_t tiles_c, int64_t tiles, bool vec) {
  __shared__ uint32_t tile[64][17];
  const float s = __ldg(sp);
  const int tid = threadIdx.x, m = tid & 15, lane = tid & 31, warp = tid >> 5;
  const int q = (lane & 7) + 8 * (warp & 1), p = (lane >> 3) + 4 * (warp >> 1);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * 64, c0 = (t % tiles_c) * 64;
    const bool full = vec && r0 + 64 <= rows && c0 + 64 <= cols;
    uint2 v[4];
    float x[4][4];
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int64_t r = r0 + (tid >> 4) + 16 * it, c = c0 + 4 * m;
      if constexpr (kWidenAtLoad) {  // the runtime's load4 and load of 2026-12-03
        if (full) {
          const uint2 t = __ldg(reinterpret_cast<const uint2*>(src + r * cols + c));
          x[it][0] = bf(t.x & 0xffffu);
          x[it][1] = bf(t.x >> 16);
          x[it][2] = bf(t.y & 0xffffu);
          x[it][3] = bf(t.y >> 16);
        } else {
          for (int j = 0; j < 4; ++j) x[it][j] = bf(at(src, rows, cols, r, c + j));
        }
      } else if (full) {
        v[it] = __ldg(reinterpret_cast<const uint2*>(src + r * cols + c));
      } else {
        v[it].x = at(src, rows, cols, r, c) | (uint32_t(at(src, rows, cols, r, c + 1)) << 16);
        v[it].y = at(src, rows, cols, r, c + 2) | (uint32_t(at(src, rows, cols, r, c + 3)) << 16);
      }
    }
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      tile[(tid >> 4) + 16 * it][m] = kWidenAtLoad ? cast2(x[it][0] * s, x[it][1] * s) |
                                                         (cast2(x[it][2] * s, x[it][3] * s) << 16)
                                                   : cast4(v[it], s);
    }
    __syncthreads();
    uint32_t w[4], o[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = tile[4 * q + i][p];
    transpose4x4(w, o);
    const int64_t r = r0 + 4 * q;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = c0 + 4 * p + j;
      if (full) {
        *reinterpret_cast<uint32_t*>(dst + c * rows + r) = o[j];
      } else if (c < cols) {
        for (int b = 0; b < 4; ++b)
          if (r + b < rows) dst[c * rows + r + b] = uint8_t(o[j] >> (8 * b));
      }
    }
    __syncthreads();
  }
}

// v1: one [128, 128] tile per iteration. Load: 16 threads a row, 16 bytes (8 elements) each,
// 16 rows a pass, 8 passes. Shared: e4m3 words, 33 a row. Store: a thread reads 16 words down
// a column of words, transposes four 4x4 byte blocks and writes four 16-byte chunks, one into
// each of 4 output rows. vec: the 16-byte loads and stores are aligned (cols % 8, rows % 16).
__global__ void __launch_bounds__(256)
    v1(const uint16_t* src, int64_t rows, int64_t cols, uint8_t* dst, const float* sp,
       int64_t tiles_c, int64_t tiles, bool vec) {
  __shared__ uint32_t tile[128][33];
  const float s = __ldg(sp);
  const int tid = threadIdx.x, lc = tid & 15, lr = tid >> 4, lane = tid & 31, warp = tid >> 5;
  const int rq = (lane & 1) + 2 * (warp & 3), w = (lane >> 1) + 16 * (warp >> 2);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * 128, c0 = (t % tiles_c) * 128;
    const bool full = vec && r0 + 128 <= rows && c0 + 128 <= cols;
    uint4 v[8];
#pragma unroll
    for (int it = 0; it < 8; ++it) {
      const int64_t r = r0 + lr + 16 * it, c = c0 + 8 * lc;
      if (full) {
        v[it] = __ldg(reinterpret_cast<const uint4*>(src + r * cols + c));
      } else {
        uint32_t x[4];
        for (int k = 0; k < 4; ++k)
          x[k] = at(src, rows, cols, r, c + 2 * k) |
                 (uint32_t(at(src, rows, cols, r, c + 2 * k + 1)) << 16);
        v[it] = make_uint4(x[0], x[1], x[2], x[3]);
      }
    }
#pragma unroll
    for (int it = 0; it < 8; ++it) {
      tile[lr + 16 * it][2 * lc] = cast4(make_uint2(v[it].x, v[it].y), s);
      tile[lr + 16 * it][2 * lc + 1] = cast4(make_uint2(v[it].z, v[it].w), s);
    }
    __syncthreads();
    uint32_t x[16], o[4][4];
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = tile[16 * rq + i][w];
#pragma unroll
    for (int b = 0; b < 4; ++b) transpose4x4(x + 4 * b, o[b]);
    const int64_t r = r0 + 16 * rq;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = c0 + 4 * w + j;
      if (full) {
        *reinterpret_cast<uint4*>(dst + c * rows + r) =
            make_uint4(o[0][j], o[1][j], o[2][j], o[3][j]);
      } else if (c < cols) {
        for (int b = 0; b < 4; ++b)
          for (int k = 0; k < 4; ++k)
            if (r + 4 * b + k < rows) dst[c * rows + r + 4 * b + k] = uint8_t(o[b][j] >> (8 * k));
      }
    }
    __syncthreads();
  }
}

// normal(0, 1) by Box-Muller on a hash of the index: never all zeros, as cgemm-bench's data.
__global__ void fill_normal(uint16_t* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    const float u1 = (float(h >> 8) + 1.0f) / 16777217.0f;
    const float u2 = float(h & 0xffu) / 256.0f;
    const float f = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    p[i] = uint16_t(__float_as_uint(f) >> 16);
  }
}
__global__ void diff(const uint8_t* a, const uint8_t* b, int64_t n, unsigned long long* bad) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    if (a[i] != b[i]) atomicAdd(bad, 1ull);
}

struct Shape {
  int64_t rows, cols;
};
using Launch = std::function<void(const uint16_t*, Shape, uint8_t*)>;
struct Variant {
  std::string name;
  Launch launch;
};

// The runtime's scale state (cgemm::ScaleStateLayout) and its scale, which v0 and v1 read.
static const float* g_state = nullptr;
static const float* g_scale = nullptr;

static void prod(const uint16_t* src, Shape s, uint8_t* dst) {
  CK(cgemm::cuda::launch_quantize_tensor(src, cgemm::DType::kBFloat16, s.rows, s.cols, dst,
                                         cgemm::DType::kFloat8E4M3, true, g_state, nullptr, 0));
}
// The runtime's kernel measuring the amax as it casts (QuantizeTask::amax; the codes the same).
static float* g_amax = nullptr;
static void prod_amax(const uint16_t* src, Shape s, uint8_t* dst) {
  CK(cgemm::cuda::launch_quantize_tensor(src, cgemm::DType::kBFloat16, s.rows, s.cols, dst,
                                         cgemm::DType::kFloat8E4M3, true, g_state, g_amax, 0));
}
// The runtime's kernel on the same bits read as float16 (timed only: its codes differ).
static void prod_f16(const uint16_t* src, Shape s, uint8_t* dst) {
  CK(cgemm::cuda::launch_quantize_tensor(src, cgemm::DType::kFloat16, s.rows, s.cols, dst,
                                         cgemm::DType::kFloat8E4M3, true, g_state, nullptr, 0));
}

// v0 with dynamic shared memory padding each block so that at most `blocks` fit on an SM.
template <bool kWidenAtLoad>
static Launch v0_at(int blocks, size_t* pad_out) {
  size_t pad = 0;
  int fit = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, v0<kWidenAtLoad>, 256, 0));
  while (fit > blocks) {
    pad += 256;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, v0<kWidenAtLoad>, 256, pad));
  }
  if (fit != blocks) {
    printf("v0 cannot be held at %d blocks an SM (%d fit)\n", blocks, fit);
    exit(1);
  }
  *pad_out = pad;
  return [pad](const uint16_t* src, Shape s, uint8_t* dst) {
    const int64_t tc = (s.cols + 63) / 64, tiles = ((s.rows + 63) / 64) * tc;
    const bool vec = s.cols % 4 == 0 && s.rows % 4 == 0;
    v0<kWidenAtLoad><<<unsigned(std::min<int64_t>(tiles, 1 << 20)), 256, pad>>>(
        src, s.rows, s.cols, dst, g_scale, tc, tiles, vec);
    CK(cudaGetLastError());
  };
}

static void v1_launch(const uint16_t* src, Shape s, uint8_t* dst) {
  const int64_t tc = (s.cols + 127) / 128, tiles = ((s.rows + 127) / 128) * tc;
  const bool vec = s.cols % 8 == 0 && s.rows % 16 == 0;
  v1<<<unsigned(std::min<int64_t>(tiles, 1 << 20)), 256>>>(src, s.rows, s.cols, dst, g_scale, tc,
                                                           tiles, vec);
  CK(cudaGetLastError());
}

int main(int argc, char** argv) {
  const int64_t cols = 4096;
  const int64_t max_mib = 1024;
  const int64_t max_elems = max_mib * (1 << 20) / 2;
  using Layout = cgemm::ScaleStateLayout;
  std::vector<float> state(size_t(Layout::floats(0)), 0.0f);
  state[Layout::kScale] = state[Layout::kScaleInv] = 1.0f;
  float* sp;
  CK(cudaMalloc(&sp, state.size() * 4));
  CK(cudaMemcpy(sp, state.data(), state.size() * 4, cudaMemcpyHostToDevice));
  g_state = sp;
  g_scale = sp + Layout::kScale;
  CK(cudaMalloc(&g_amax, 4));
  std::vector<Variant> variants{{"prod", prod}, {"prod+amax", prod_amax}};
  std::vector<size_t> pads;
  for (int b : {8, 7, 6, 5, 4}) {
    size_t pad = 0;
    variants.push_back({"v0/" + std::to_string(b), v0_at<false>(b, &pad)});
    pads.push_back(pad);
  }
  for (int b : {8, 6}) {
    size_t pad = 0;
    variants.push_back({"v0w/" + std::to_string(b), v0_at<true>(b, &pad)});
  }
  variants.push_back({"v1", v1_launch});
  variants.push_back({"prod/f16", prod_f16});
  const auto find = [&](const std::string& name) -> const Variant& {
    for (const Variant& v : variants)
      if (v.name == name) return v;
    printf("no variant %s\n", name.c_str());
    exit(2);
  };

  int l2 = 0;
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  uint16_t* src0;
  uint8_t* out0;
  CK(cudaMalloc(&src0, max_elems * 2));
  CK(cudaMalloc(&out0, max_elems));
  fill_normal<<<1024, 256>>>(src0, max_elems, 1234u);
  CK(cudaDeviceSynchronize());
  if (argc == 4 && strcmp(argv[1], "--once") == 0) {
    const Shape s{atoll(argv[3]) * (1 << 20) / 2 / cols, cols};
    find(argv[2]).launch(src0, s, out0);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, L2 %d MiB; v0 shared-memory pads for 8..4 blocks an SM:", prop.name,
         prop.multiProcessorCount, l2 >> 20);
  for (size_t p : pads) printf(" %zu", p);
  printf(" bytes\n");

  // Correctness: every variant equals the runtime's kernel byte for byte.
  uint8_t* out1;
  unsigned long long* bad;
  CK(cudaMalloc(&out1, max_elems));
  CK(cudaMalloc(&bad, 8));
  for (Shape s : {Shape{8192, 4096}, Shape{1000, 4100}, Shape{77, 130}, Shape{4096, 12}}) {
    CK(cudaMemset(out0, 0xCD, s.rows * s.cols));
    prod(src0, s, out0);
    for (size_t k = 1; k < variants.size(); ++k) {
      if (variants[k].name == "prod/f16") continue;
      CK(cudaMemset(out1, 0xAB, s.rows * s.cols));
      variants[k].launch(src0, s, out1);
      CK(cudaMemset(bad, 0, 8));
      diff<<<1024, 256>>>(out0, out1, s.rows * s.cols, bad);
      unsigned long long h = 0;
      CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
      printf("check [%lld, %lld] %s: %llu bytes differ from prod %s\n", (long long)s.rows,
             (long long)s.cols, variants[k].name.c_str(), h, h == 0 ? "OK" : "FAIL");
      if (h != 0) return 1;
    }
  }
  CK(cudaFree(out1));

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int reps = 20, batch = 8;
  for (const bool batched : {false, true}) {
    printf("\n%s: GB/s (%% of the copy)\n\n| bf16 MiB | copy", batched ? "batched" : "alone");
    for (const Variant& v : variants) printf(" | %s", v.name.c_str());
    printf(" |\n| ---");
    for (size_t k = 0; k <= variants.size(); ++k) printf(" | ---");
    printf(" |\n");
    for (int64_t mib = 64; mib <= max_mib; mib *= 2) {
      const Shape s{mib * (1 << 20) / 2 / cols, cols};
      const size_t bytes = size_t(s.rows) * s.cols * 2;
      // batched: enough (source, destination) pairs to exceed twice the L2; alone: one.
      const size_t sets =
          batched ? std::max<size_t>(2, (2 * size_t(l2) + bytes - 1) / bytes) : size_t{1};
      std::vector<uint16_t*> srcs(sets);
      std::vector<void*> dsts(sets);
      for (size_t i = 0; i < sets; ++i) {
        CK(cudaMalloc(&srcs[i], bytes));
        CK(cudaMalloc(&dsts[i], bytes));
        fill_normal<<<1024, 256>>>(srcs[i], int64_t(bytes / 2), 11u + unsigned(i));
      }
      size_t turn = 0;
      const int n = batched ? batch : 1;
      std::vector<std::vector<float>> t(variants.size() + 1);
      for (int rep = -3; rep < reps; ++rep) {
        for (size_t k = 0; k <= variants.size(); ++k) {
          CK(cudaEventRecord(e0));
          for (int i = 0; i < n; ++i) {
            const size_t j = turn++ % sets;
            if (k == 0) {
              CK(cudaMemcpyAsync(dsts[j], srcs[j], bytes, cudaMemcpyDeviceToDevice));
            } else {
              variants[k - 1].launch(srcs[j], s, static_cast<uint8_t*>(dsts[j]));
            }
          }
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          if (rep >= 0) t[k].push_back(ms / n);
        }
      }
      double copy_gbs = 0;
      printf("| %lld", (long long)mib);
      for (size_t k = 0; k <= variants.size(); ++k) {
        std::sort(t[k].begin(), t[k].end());
        const double med = t[k][reps / 2];
        const double gbs = (k == 0 ? 2.0 : 1.5) * double(bytes) / (med * 1e-3) / 1e9;
        if (k == 0) {
          copy_gbs = gbs;
          printf(" | %.0f", gbs);
        } else {
          printf(" | %.0f (%.1f%%)", gbs, 100 * gbs / copy_gbs);
        }
      }
      printf(" |\n");
      fflush(stdout);
      for (size_t i = 0; i < sets; ++i) {
        CK(cudaFree(srcs[i]));
        CK(cudaFree(dsts[i]));
      }
    }
  }
  return 0;
}
