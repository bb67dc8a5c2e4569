// Probe of 2026-12-03 (docs/PERFORMANCE.md, the grouped GEMM table): a grouped GEMM's ragged rows as
// cuBLASLt pointer-array batched matmuls over power-of-two row tiles, against a loop and a dense
// GEMM, for tile caps 64..2048. Build: nvcc -O2 -std=c++17 -arch=sm_90 -o tiles_probe
// tiles_probe.cu -lcublasLt -cudart static; run on one GPU (prints probe.log's lines).
// Probe: grouped GEMM (ragged rows) as cuBLASLt pointer-array batched matmuls over row tiles.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)
#define LK(x) do { cublasStatus_t st_ = (x); if (st_ != CUBLAS_STATUS_SUCCESS) { printf("cublasLt %s at %d: %d\n", #x, __LINE__, (int)st_); exit(1);} } while (0)
static cublasLtHandle_t lt; static void* ws; static size_t wsb = 32u << 20;
struct Mm { bool ok = true; cublasLtMatmulDesc_t d; cublasLtMatrixLayout_t a, b, c; cublasLtMatmulAlgo_t algo; };
// row-major out[m,N] = lhs[m,K] @ rhs[K,N]; batch>0: pointer arrays (batch<0: strided |batch| with strides)
static Mm make(int m, int n, int k, int batch, bool ptr, long long sa = 0, long long sb = 0, long long sc = 0, const void* bias = nullptr) {
  Mm x; LK(cublasLtMatmulDescCreate(&x.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  if (bias) { cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS; LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep)); LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias)); int64_t bs = n; LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bs, sizeof bs)); }
  LK(cublasLtMatrixLayoutCreate(&x.a, CUDA_R_16BF, n, k, n));
  LK(cublasLtMatrixLayoutCreate(&x.b, CUDA_R_16BF, k, m, k));
  LK(cublasLtMatrixLayoutCreate(&x.c, CUDA_R_16BF, n, m, n));
  if (batch > 1 || ptr) {
    int32_t mode = ptr ? CUBLASLT_BATCH_MODE_POINTER_ARRAY : CUBLASLT_BATCH_MODE_STRIDED;
    long long st[3] = {sa, sb, sc}; cublasLtMatrixLayout_t ls[3] = {x.a, x.b, x.c};
    for (int i = 0; i < 3; ++i) {
      LK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
      if (ptr) LK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof mode));
      else LK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st[i], sizeof st[i]));
    }
  }
  cublasLtMatmulPreference_t p; LK(cublasLtMatmulPreferenceCreate(&p));
  LK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
  cublasLtMatmulHeuristicResult_t r; int got = 0;
  cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, x.d, x.a, x.b, x.c, x.c, p, 1, &r, &got);
  if (bias && (hs != CUBLAS_STATUS_SUCCESS || got == 0)) { printf("      bias epilogue: no algo (status %d)\n", (int)hs); x.ok = false; return x; }
  LK(hs);
  if (got == 0) { printf("no algo m=%d n=%d k=%d batch=%d ptr=%d\n", m, n, k, batch, ptr); exit(1); }
  x.algo = r.algo; return x;
}
static void mm(const Mm& x, const void* A, const void* B, void* C, cudaStream_t s) {
  float one = 1, zero = 0;
  LK(cublasLtMatmul(lt, x.d, &one, A, x.a, B, x.b, &zero, C, x.c, C, x.c, &x.algo, ws, wsb, s));
}
template <class F> static float timeit(F f, cudaStream_t s) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < 20; ++i) { cudaEventRecord(a, s); f(); cudaEventRecord(b, s); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms); }
  std::sort(t.begin(), t.end()); return t[10];
}
__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}
int main() {
  LK(cublasLtCreate(&lt)); CK(cudaMalloc(&ws, wsb));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  struct Case { long M; int G, K, N; bool skew; };
  Case cases[] = {{32768, 8, 4096, 14336, false}, {65536, 64, 4096, 2048, false}, {65536, 64, 4096, 2048, true},
                  {16384, 64, 2048, 1408, false}, {16384, 64, 2048, 1408, true}};
  for (auto c : cases) {
    std::vector<int> sz(c.G);
    if (!c.skew) std::fill(sz.begin(), sz.end(), int(c.M / c.G));
    else {
      std::mt19937 rng(7); std::vector<double> w(c.G);
      for (int g = 0; g < c.G; ++g) w[g] = g < 8 ? 0 : 1.0 / std::pow(g - 7, 0.9) * (0.5 + std::uniform_real_distribution<>(0, 1)(rng));
      std::shuffle(w.begin(), w.end(), rng);
      double tot = 0; for (double x : w) tot += x; long used = 0;
      for (int g = 0; g < c.G; ++g) { sz[g] = int(std::floor(w[g] / tot * c.M)); used += sz[g]; }
      for (int g = 0; used < c.M; g = (g + 1) % c.G) if (w[g] > 0) { sz[g]++; used++; }
    }
    size_t K = c.K, N = c.N, M = c.M;
    __nv_bfloat16 *lhs, *rhs, *out, *ref;
    CK(cudaMalloc(&lhs, M * K * 2)); CK(cudaMalloc(&rhs, c.G * K * N * 2)); CK(cudaMalloc(&out, M * N * 2)); CK(cudaMalloc(&ref, M * N * 2));
    fill<<<1024, 256, 0, s>>>(lhs, M * K, 1); fill<<<1024, 256, 0, s>>>(rhs, c.G * K * N, 2);
    double flop = 2.0 * M * N * K;
    auto tf = [&](float ms) { return flop / ms / 1e9; };
    // dense floor
    Mm dn = make(int(M), int(N), int(K), 1, false);
    float t_dense = timeit([&] { mm(dn, rhs, lhs, out, s); }, s);
    // loop
    std::map<int, Mm> lm; for (int m : sz) if (m > 0 && !lm.count(m)) lm[m] = make(m, int(N), int(K), 1, false);
    auto loop = [&] { long off = 0; for (int g = 0; g < c.G; ++g) { if (sz[g]) mm(lm[sz[g]], rhs + g * K * N, lhs + off * K, ref + off * N, s); off += sz[g]; } };
    float t_loop = timeit(loop, s);
    printf("case M %ld G %d K %d N %d %s: dense %.3f ms (%.0f)  loop %.3f (%.0f)\n", c.M, c.G, c.K, c.N, c.skew ? "skewed" : "uniform", t_dense, tf(t_dense), t_loop, tf(t_loop));
    if (!c.skew) {
      int rows = int(M / c.G);
      Mm sb = make(rows, int(N), int(K), c.G, false, (long long)K * N, (long long)rows * K, (long long)rows * N);
      CK(cudaMemset(out, 0xff, M * N * 2));
      float t = timeit([&] { mm(sb, rhs, lhs, out, s); }, s);
      printf("  strided batched: %.3f (%.0f)\n", t, tf(t));
    }
    for (int T : {64, 128, 256, 512, 1024, 2048}) {
      // classes: tile = min(T, pow2floor(m)); tiles at 0, t, 2t, ... last at m - t (overlap)
      std::map<int, std::vector<const void*>> A, B, C;
      long off = 0;
      for (int g = 0; g < c.G; ++g) {
        int m = sz[g];
        if (m > 0) {
          int t = 1; while (t * 2 <= std::min(m, T)) t *= 2;
          for (long r = 0;; r += t) {
            long st = std::min<long>(r, m - t);
            A[t].push_back(rhs + g * K * N); B[t].push_back(lhs + (off + st) * K); C[t].push_back(out + (off + st) * N);
            if (st == m - t) break;
          }
        }
        off += m;
      }
      std::vector<Mm> ms; std::vector<void**> dp; long tiles = 0; long rowsdone = 0;
      for (auto& [t, v] : A) {
        int bc = int(v.size()); tiles += bc; rowsdone += long(bc) * t;
        ms.push_back(make(t, int(N), int(K), bc, true));
        void** d; CK(cudaMalloc(&d, 3 * bc * sizeof(void*)));
        CK(cudaMemcpy(d, v.data(), bc * sizeof(void*), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d + bc, B[t].data(), bc * sizeof(void*), cudaMemcpyHostToDevice));
        CK(cudaMemcpy(d + 2 * bc, C[t].data(), bc * sizeof(void*), cudaMemcpyHostToDevice));
        dp.push_back(d);
      }
      CK(cudaMemset(out, 0xff, M * N * 2));
      auto run = [&] { int i = 0; for (auto& [t, v] : A) { int bc = int(v.size()); mm(ms[i], dp[i], dp[i] + bc, dp[i] + 2 * bc, s); ++i; } };
      float t = timeit(run, s);
      CK(cudaStreamSynchronize(s));
      std::vector<__nv_bfloat16> h1(M * N), h2(M * N);
      CK(cudaMemcpy(h1.data(), out, M * N * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(h2.data(), ref, M * N * 2, cudaMemcpyDeviceToHost));
      double md = 0, mr = 0; size_t diff = 0;
      for (size_t i = 0; i < M * N; ++i) { double a = __bfloat162float(h1[i]), b = __bfloat162float(h2[i]); if (!(a == b)) diff++; md = std::max(md, std::fabs(a - b)); mr = std::max(mr, std::fabs(b)); }
      printf("  tiles T %4d: %.3f ms (%.0f)  calls %zu tiles %ld rows computed %.3fx  vs loop: %zu differ, max |d| %.3g of %.3g\n", T, t, tf(t), A.size(), tiles, double(rowsdone) / M, diff, md, mr);
      if (T >= 128 && T <= 512) {
        // bias epilogue, bias table [tiles, N] (tile i's row = bias of its group, here value 0.25*(g%7))
        std::vector<Mm> mb; std::vector<__nv_bfloat16*> tabs; int i = 0; bool ok = true;
        for (auto& [t, v] : A) {
          int bc = int(v.size()); std::vector<__nv_bfloat16> tab(size_t(bc) * N);
          for (int j = 0; j < bc; ++j) { long g = (static_cast<const __nv_bfloat16*>(v[j]) - rhs) / (K * N); for (size_t q = 0; q < N; ++q) tab[j * N + q] = __float2bfloat16(0.25f * (g % 7)); }
          __nv_bfloat16* d; CK(cudaMalloc(&d, tab.size() * 2)); CK(cudaMemcpy(d, tab.data(), tab.size() * 2, cudaMemcpyHostToDevice)); tabs.push_back(d);
          mb.push_back(make(t, int(N), int(K), bc, true, 0, 0, 0, d)); ++i;
        }
        bool all = true; for (auto& x : mb) all = all && x.ok;
        if (!all) { for (auto d : tabs) cudaFree(d); for (auto d : dp) cudaFree(d); continue; }
        CK(cudaMemset(out, 0xff, M * N * 2));
        auto runb = [&] { int i = 0; for (auto& [t, v] : A) { int bc = int(v.size()); mm(mb[i], dp[i], dp[i] + bc, dp[i] + 2 * bc, s); ++i; } };
        float tb = timeit(runb, s); CK(cudaStreamSynchronize(s));
        CK(cudaMemcpy(h1.data(), out, M * N * 2, cudaMemcpyDeviceToHost));
        double mx = 0; long off2 = 0;
        for (int g = 0; g < c.G; ++g) { for (long r = off2; r < off2 + sz[g]; ++r) for (size_t q = 0; q < N; ++q) { double a = __bfloat162float(h1[r * N + q]), b = __bfloat162float(h2[r * N + q]) + 0.25 * (g % 7); double e = std::fabs(a - b); if (!(e <= 1e30)) e = 1e30; mx = std::max(mx, e); } off2 += sz[g]; }
        printf("      with bias epilogue: %.3f ms (%.0f), max |out - (loop + bias)| %.3g\n", tb, tf(tb), mx);
        for (auto d : tabs) cudaFree(d);
        (void)ok;
      }
      for (auto d : dp) cudaFree(d);
    }
    cudaFree(lhs); cudaFree(rhs); cudaFree(out); cudaFree(ref);
  }
  printf("done\n");
}
