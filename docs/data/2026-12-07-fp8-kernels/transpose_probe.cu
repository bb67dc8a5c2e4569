// Probe of 2026-12-07 (issue 42, docs/PERFORMANCE.md): the quantize-transpose kernel (bf16
// [R, 4096] -> e4m3 [4096, R], scaled) against a device-to-device copy of the same bf16 bytes,
// 64 MiB to 1 GiB, for the runtime's kernel of 2026-12-03 (v0: [64, 64] tiles, 8-byte loads,
// 4-byte stores) and a [128, 128] tile with 16-byte loads and stores (v1, walking the tiles
// along row bands; v2 down column bands). Checks every variant's bytes against v0's, on the
// sweep's shapes and a ragged one. `--once V MIB` launches variant V once (for ncu).
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o transpose_probe transpose_probe.cu
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

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

// v0: the runtime's kernel of 2026-12-03 (bf16 only), one [64, 64] tile per block.
__global__ void __launch_bounds__(256)
    v0(const uint16_t* src, int64_t rows, int64_t cols, uint8_t* dst, const float* sp,
       int64_t tiles_c, int64_t tiles) {
  __shared__ uint32_t tile[64][17];
  const float s = __ldg(sp);
  const int tid = threadIdx.x, m = tid & 15, lane = tid & 31, warp = tid >> 5;
  const int q = (lane & 7) + 8 * (warp & 1), p = (lane >> 3) + 4 * (warp >> 1);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * 64, c0 = (t % tiles_c) * 64;
    const bool full = r0 + 64 <= rows && c0 + 64 <= cols;
    uint2 v[4];
#pragma unroll
    for (int it = 0; it < 4; ++it) {
      const int64_t r = r0 + (tid >> 4) + 16 * it, c = c0 + 4 * m;
      if (full) {
        v[it] = __ldg(reinterpret_cast<const uint2*>(src + r * cols + c));
      } else {
        v[it].x = at(src, rows, cols, r, c) | (uint32_t(at(src, rows, cols, r, c + 1)) << 16);
        v[it].y = at(src, rows, cols, r, c + 2) | (uint32_t(at(src, rows, cols, r, c + 3)) << 16);
      }
    }
#pragma unroll
    for (int it = 0; it < 4; ++it) tile[(tid >> 4) + 16 * it][m] = cast4(v[it], s);
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

// v1 / v2: one [128, 128] tile per iteration. Load: 16 threads a row, 16 bytes (8 elements)
// each, 16 rows a pass, 8 passes (128 bytes in flight a thread). Shared: e4m3 words, 33 a row.
// Store: a thread reads 16 words down a column of words (input rows 16rq..16rq+15, columns
// 4w..4w+3), transposes four 4x4 byte blocks and writes four 16-byte chunks, one into each of
// output rows 4w..4w+3; lane pairs (rq even, odd) fill a 32-byte sector; the word reads of a
// warp fall in 32 banks (rq even: bank i + w, odd: 16 + i + w, w 16 consecutive values).
template <bool kColumnWalk>
__global__ void __launch_bounds__(256)
    v12(const uint16_t* src, int64_t rows, int64_t cols, uint8_t* dst, const float* sp,
        int64_t tiles_r, int64_t tiles_c, int64_t tiles) {
  __shared__ uint32_t tile[128][33];
  const float s = __ldg(sp);
  const int tid = threadIdx.x, lc = tid & 15, lr = tid >> 4, lane = tid & 31, warp = tid >> 5;
  const int rq = (lane & 1) + 2 * (warp & 3), w = (lane >> 1) + 16 * (warp >> 2);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t tr = kColumnWalk ? t % tiles_r : t / tiles_c;
    const int64_t tc = kColumnWalk ? t / tiles_r : t % tiles_c;
    const int64_t r0 = tr * 128, c0 = tc * 128;
    const bool full = r0 + 128 <= rows && c0 + 128 <= cols;
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

__global__ void fill(uint16_t* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    const float f = (float(h & 0xffffff) / 16777216.0f - 0.5f) * 8.0f;  // never all zeros
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
static void launch(int v, const uint16_t* src, Shape s, uint8_t* dst, const float* sp, int grid) {
  if (v == 0) {
    const int64_t tc = (s.cols + 63) / 64, tiles = ((s.rows + 63) / 64) * tc;
    v0<<<unsigned(std::min<int64_t>(tiles, 1 << 20)), 256>>>(src, s.rows, s.cols, dst, sp, tc,
                                                             tiles);
  } else {
    const int64_t tr = (s.rows + 127) / 128, tc = (s.cols + 127) / 128, tiles = tr * tc;
    const unsigned g = unsigned(grid > 0 ? std::min<int64_t>(grid, tiles) : tiles);
    if (v == 1) v12<false><<<g, 256>>>(src, s.rows, s.cols, dst, sp, tr, tc, tiles);
    if (v == 2) v12<true><<<g, 256>>>(src, s.rows, s.cols, dst, sp, tr, tc, tiles);
  }
  CK(cudaGetLastError());
}

int main(int argc, char** argv) {
  const int64_t cols = 4096;
  const int64_t max_mib = 1024;
  const int64_t max_elems = max_mib * (1 << 20) / 2;
  uint16_t *src, *copy;
  uint8_t *out0, *out1;
  float* sp;
  CK(cudaMalloc(&src, max_elems * 2));
  CK(cudaMalloc(&copy, max_elems * 2));
  CK(cudaMalloc(&out0, max_elems));
  CK(cudaMalloc(&out1, max_elems));
  CK(cudaMalloc(&sp, 4));
  const float scale = 37.5f;
  CK(cudaMemcpy(sp, &scale, 4, cudaMemcpyHostToDevice));
  fill<<<1024, 256>>>(src, max_elems, 1234u);
  CK(cudaDeviceSynchronize());
  int sms = 0, per_sm = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v12<false>, 256, 0));
  const int persistent = sms * per_sm;
  if (argc == 4 && strcmp(argv[1], "--once") == 0) {
    const int v = atoi(argv[2]);
    const Shape s{atoll(argv[3]) * (1 << 20) / 2 / cols, cols};
    launch(v, src, s, out0, sp, 0);
    CK(cudaDeviceSynchronize());
    return 0;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, v1 blocks per SM %d\n", prop.name, sms, per_sm);
  // Correctness: every variant (and v1 on a persistent grid) equals v0 byte for byte.
  unsigned long long* bad;
  CK(cudaMalloc(&bad, 8));
  for (Shape s : {Shape{8192, 4096}, Shape{1000, 4100}, Shape{77, 130}, Shape{4096, 12}}) {
    launch(0, src, s, out0, sp, 0);
    for (int v : {1, 2, -1}) {
      CK(cudaMemset(out1, 0xAB, s.rows * s.cols));
      launch(v < 0 ? 1 : v, src, s, out1, sp, v < 0 ? persistent : 0);
      CK(cudaMemset(bad, 0, 8));
      diff<<<1024, 256>>>(out0, out1, s.rows * s.cols, bad);
      unsigned long long h = 0;
      CK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
      printf("check [%lld, %lld] v%d%s: %llu bytes differ from v0 %s\n", (long long)s.rows,
             (long long)s.cols, v < 0 ? 1 : v, v < 0 ? " persistent" : "", h,
             h == 0 ? "OK" : "FAIL");
      if (h != 0) return 1;
    }
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int reps = 20;
  printf(
      "| bf16 MiB | copy GB/s | v0 GB/s | v0 %% of copy | v1 GB/s | v1 %% | v2 GB/s | v2 %% | "
      "v1 persistent GB/s | v1p %% |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
      "|\n");
  for (int64_t mib = 64; mib <= max_mib; mib *= 2) {
    const Shape s{mib * (1 << 20) / 2 / cols, cols};
    const double bytes = double(s.rows) * s.cols;
    // Interleaved rounds: copy, v0, v1, v2, v1 persistent; medians of `reps`.
    std::vector<float> t[5];
    for (int rep = -3; rep < reps; ++rep) {
      for (int k = 0; k < 5; ++k) {
        CK(cudaEventRecord(e0));
        if (k == 0) {
          CK(cudaMemcpyAsync(copy, src, size_t(bytes) * 2, cudaMemcpyDeviceToDevice));
        } else {
          launch(k == 4 ? 1 : k - 1, src, s, out1, sp, k == 4 ? persistent : 0);
        }
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep >= 0) t[k].push_back(ms);
      }
    }
    double gbs[5];
    for (int k = 0; k < 5; ++k) {
      std::sort(t[k].begin(), t[k].end());
      const double med = t[k][reps / 2];
      gbs[k] = (k == 0 ? 4.0 : 3.0) * bytes / (med * 1e-3) / 1e9;
    }
    printf("| %lld | %.0f | %.0f | %.1f | %.0f | %.1f | %.0f | %.1f | %.0f | %.1f |\n",
           (long long)mib, gbs[0], gbs[1], 100 * gbs[1] / gbs[0], gbs[2], 100 * gbs[2] / gbs[0],
           gbs[3], 100 * gbs[3] / gbs[0], gbs[4], 100 * gbs[4] / gbs[0]);
  }
  return 0;
}
