// Probe of 2026-12-07 (issue 42, docs/PERFORMANCE.md): can the grouped GEMM's FP8 run on the
// cuBLASLt tiles path? A tiles matmul (pointer-array batch mode) mixes tiles of several groups,
// and an FP8 group has its own lhs and rhs scale_inv; cuBLASLt's A/B scale pointers are one
// scalar per matmul. The per-tile carrier tried here: the alpha vector
// (CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST, one alpha per output column of cuBLASLt's
// M = N, CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE = N), each tile's N values its group's
// lhs_scale_inv * rhs_scale_inv. Prints: whether the heuristic finds an algorithm, the error
// against a float64 reference of the dequantized codes on a small ragged case, and the time of
// bf16 tiles, FP8 tiles (scalar scales, one group's), FP8 tiles (alpha vector) and an FP8 loop
// (one matmul per group, its scale pointers) on equal groups of the MoE cases.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -o fp8_tiles_probe fp8_tiles_probe.cu -lcublasLt
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)
#define LK(x)                                                                     \
  do {                                                                            \
    cublasStatus_t s_ = (x);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      printf("cublasLt %s at %d: %s\n", #x, __LINE__, cublasLtGetStatusName(s_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static cublasLtHandle_t lt;
static void* ws;
static const size_t kWs = size_t{32} << 20;

enum class Mode { kBf16, kFp8Scalar, kFp8AlphaVector };

struct Mm {
  bool ok = false;
  cublasLtMatmulDesc_t d = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// D[N, rows] (column-major; row-major out rows) = A^T B with A = rhs[g] [N, K] row-major and B
// the tile's lhs rows [rows, K]; `count` entries in pointer-array mode (count 0: one plain
// matmul). Scalar mode: A/B scale pointers given.
static Mm make(Mode mode, int64_t n, int64_t k, int64_t rows, int count, const float* sa,
               const float* sb) {
  Mm x;
  const bool fp8 = mode != Mode::kBf16;
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  LK(cublasLtMatmulDescCreate(&x.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn));
  if (fp8) {  // the runtime's default (NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION unset)
    const int8_t fast = 1;
    LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  }
  if (mode == Mode::kFp8Scalar) {
    LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
  }
  if (mode == Mode::kFp8AlphaVector) {
    const int32_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
    LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
    const int64_t stride = n;
    LK(cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, &stride,
                                      sizeof stride));
  }
  LK(cublasLtMatrixLayoutCreate(&x.a, in, k, n, k));
  LK(cublasLtMatrixLayoutCreate(&x.b, in, k, rows, k));
  LK(cublasLtMatrixLayoutCreate(&x.c, CUDA_R_16BF, n, rows, n));
  if (count > 0) {
    const int32_t pa = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    for (cublasLtMatrixLayout_t l : {x.a, x.b, x.c}) {
      LK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &pa, sizeof pa));
      LK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                          sizeof count));
    }
  }
  cublasLtMatmulPreference_t pref;
  LK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t w = kWs;
  LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w,
                                          sizeof w));
  if (count > 0) {
    const uint32_t sch =
        CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &sch,
                                            sizeof sch));
    const uint32_t al = 16;
    for (auto at :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      LK(cublasLtMatmulPreferenceSetAttribute(pref, at, &al, sizeof al));
  }
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, x.d, x.a, x.b, x.c, x.c, pref, 1, &r, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  x.ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (!x.ok) printf("  heuristic: %s, %d found\n", cublasLtGetStatusName(st), found);
  x.algo = r.algo;
  return x;
}

static void run(const Mm& m, const void* alpha, const void* a, const void* b, void* d) {
  const float beta = 0.0f;
  LK(cublasLtMatmul(lt, m.d, alpha, a, m.a, b, m.b, &beta, d, m.c, d, m.c, &m.algo, ws, kWs, 0));
}

__global__ void fill_alpha(float* alpha, const int* tile_group, const float* sa, const float* sb,
                           int count, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count * n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int g = tile_group[i / n];
    alpha[i] = sa[g] * sb[g];
  }
}

template <typename T>
static T* dev(const std::vector<T>& h) {
  T* p;
  CK(cudaMalloc(&p, h.size() * sizeof(T)));
  CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

struct Case {
  int64_t tokens, groups, k, n;
};

int main() {
  LK(cublasLtCreate(&lt));
  CK(cudaMalloc(&ws, kWs));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, cuBLASLt %zu\n", prop.name, cublasLtGetVersion());
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);

  // 1. Correctness: groups {64, 128, 64} rows as 4 tiles of 64, N 128, K 256, e4m3 codes of
  // random values, per-group scale_invs; out bf16 against float64 of the dequantized codes.
  {
    const int64_t n = 128, k = 256, rows = 64;
    const std::vector<int> sizes{64, 128, 64};
    const int groups = 3, count = 4;
    const std::vector<int> tile_group{0, 1, 1, 2};
    const std::vector<int64_t> tile_first{0, 64, 128, 192};
    const int64_t m = 256;
    std::vector<__nv_fp8_e4m3> lhs(m * k), rhs(groups * n * k);
    for (auto& v : lhs) v = __nv_fp8_e4m3(nd(rng) * 20.0f);
    for (auto& v : rhs) v = __nv_fp8_e4m3(nd(rng) * 20.0f);
    const std::vector<float> sa{0.01f, 0.5f, 0.003f}, sb{0.2f, 0.0625f, 1.5f};
    auto* dl = dev(lhs);
    auto* dr = dev(rhs);
    __nv_bfloat16* dout;
    CK(cudaMalloc(&dout, m * n * 2));
    CK(cudaMemset(dout, 0xff, m * n * 2));  // NaN poison
    std::vector<const void*> ptrs(3 * count);
    for (int i = 0; i < count; ++i) {
      ptrs[i] = dr + tile_group[i] * n * k;
      ptrs[count + i] = dl + tile_first[i] * k;
      ptrs[2 * count + i] = dout + tile_first[i] * n;
    }
    auto* dp = dev(ptrs);
    auto* dsa = dev(sa);
    auto* dsb = dev(sb);
    auto* dtg = dev(tile_group);
    float* alpha;
    CK(cudaMalloc(&alpha, count * n * 4));
    fill_alpha<<<64, 256>>>(alpha, dtg, dsa, dsb, count, n);
    const Mm mm = make(Mode::kFp8AlphaVector, n, k, rows, count, nullptr, nullptr);
    printf("FP8 tiles, alpha vector: heuristic %s\n", mm.ok ? "found an algorithm" : "NONE");
    if (mm.ok) {
      run(mm, alpha, dp, dp + count, (void*)(dp + 2 * count));
      CK(cudaDeviceSynchronize());
      std::vector<__nv_bfloat16> out(m * n);
      CK(cudaMemcpy(out.data(), dout, m * n * 2, cudaMemcpyDeviceToHost));
      double worst = 0, mag = 0;
      int64_t row = 0;
      for (int g = 0; g < groups; ++g) {
        for (int r = 0; r < sizes[g]; ++r, ++row) {
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t q = 0; q < k; ++q)
              acc += double(float(lhs[row * k + q])) * double(float(rhs[(g * n + j) * k + q]));
            acc *= double(sa[g]) * double(sb[g]);
            const double got = double(__bfloat162float(out[row * n + j]));
            worst = std::max(worst, std::isnan(got) ? INFINITY : std::fabs(got - acc));
            mag = std::max(mag, std::fabs(acc));
          }
        }
      }
      printf(
          "FP8 tiles, alpha vector: max |err| %.3g of max |ref| %.3g (%.2e relative; bf16 "
          "rounding is 3.9e-3) %s\n",
          worst, mag, worst / mag, worst / mag < 8e-3 ? "OK" : "FAIL");
    }
  }

  // 2. Timing on equal groups (256-row tiles, as the tiles path cuts them), medians of 20.
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf(
      "| tokens x G x K x N | bf16 tiles ms | FP8 tiles scalar ms | FP8 tiles alpha vector ms | "
      "FP8 loop ms | bf16 / FP8 alpha vector | FP8 loop / FP8 alpha vector |\n"
      "| --- | --- | --- | --- | --- | --- | --- |\n");
  for (Case c :
       {Case{32768, 8, 4096, 14336}, Case{65536, 64, 4096, 2048}, Case{16384, 64, 2048, 1408}}) {
    const int64_t per = c.tokens / c.groups, tile = std::min<int64_t>(256, per);
    const int count = int(c.tokens / tile);
    void *lhs, *rhs, *out;
    CK(cudaMalloc(&lhs, c.tokens * c.k * 2));
    CK(cudaMalloc(&rhs, c.groups * c.n * c.k * 2));
    CK(cudaMalloc(&out, c.tokens * c.n * 2));
    CK(cudaMemset(lhs, 0x3c, c.tokens * c.k * 2));  // codes of modest values in both formats
    CK(cudaMemset(rhs, 0x3c, c.groups * c.n * c.k * 2));
    std::vector<float> s(c.groups, 0.5f);
    std::vector<int> tg(count);
    for (int i = 0; i < count; ++i) tg[i] = int(i * tile / per);
    auto* dsa = dev(s);
    auto* dsb = dev(s);
    auto* dtg = dev(tg);
    float* alpha;
    CK(cudaMalloc(&alpha, count * c.n * 4));
    fill_alpha<<<256, 256>>>(alpha, dtg, dsa, dsb, count, c.n);
    std::vector<const void*> pb(3 * count), p8(3 * count);
    for (int i = 0; i < count; ++i) {
      const int g = tg[i];
      pb[i] = (char*)rhs + g * c.n * c.k * 2;
      pb[count + i] = (char*)lhs + i * tile * c.k * 2;
      pb[2 * count + i] = (char*)out + i * tile * c.n * 2;
      p8[i] = (char*)rhs + g * c.n * c.k;
      p8[count + i] = (char*)lhs + i * tile * c.k;
      p8[2 * count + i] = pb[2 * count + i];
    }
    auto* dpb = dev(pb);
    auto* dp8 = dev(p8);
    const Mm mb = make(Mode::kBf16, c.n, c.k, tile, count, nullptr, nullptr);
    const Mm ms = make(Mode::kFp8Scalar, c.n, c.k, tile, count, dsa, dsb);
    const Mm mv = make(Mode::kFp8AlphaVector, c.n, c.k, tile, count, nullptr, nullptr);
    std::vector<Mm> loop;
    for (int g = 0; g < c.groups; ++g)
      loop.push_back(make(Mode::kFp8Scalar, c.n, c.k, per, 0, dsa + g, dsb + g));
    const float one = 1.0f;
    std::vector<float> t[4];
    for (int rep = -3; rep < 20; ++rep) {
      for (int v = 0; v < 4; ++v) {
        CK(cudaEventRecord(e0));
        if (v == 0 && mb.ok) run(mb, &one, dpb, dpb + count, (void*)(dpb + 2 * count));
        if (v == 1 && ms.ok) run(ms, &one, dp8, dp8 + count, (void*)(dp8 + 2 * count));
        if (v == 2 && mv.ok) {
          fill_alpha<<<256, 256>>>(alpha, dtg, dsa, dsb, count, c.n);  // per call, as the runtime
          run(mv, alpha, dp8, dp8 + count, (void*)(dp8 + 2 * count));
        }
        if (v == 3) {
          for (int g = 0; g < c.groups; ++g)
            if (loop[g].ok)
              run(loop[g], &one, (char*)rhs + g * c.n * c.k, (char*)lhs + g * per * c.k,
                  (char*)out + g * per * c.n * 2);
        }
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float msec = 0;
        CK(cudaEventElapsedTime(&msec, e0, e1));
        if (rep >= 0) t[v].push_back(msec);
      }
    }
    double med[4];
    for (int v = 0; v < 4; ++v) {
      std::sort(t[v].begin(), t[v].end());
      med[v] = t[v][10];
    }
    printf("| %lldx%lldx%lldx%lld | %.3f | %.3f%s | %.3f%s | %.3f | %.2fx | %.2fx |\n",
           (long long)c.tokens, (long long)c.groups, (long long)c.k, (long long)c.n, med[0], med[1],
           ms.ok ? "" : " (no algo)", med[2], mv.ok ? "" : " (no algo)", med[3], med[0] / med[2],
           med[3] / med[2]);
    CK(cudaFree(lhs));
    CK(cudaFree(rhs));
    CK(cudaFree(out));
  }
  return 0;
}
