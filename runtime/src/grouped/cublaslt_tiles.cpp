// The cuBLASLt tiles runner (ragged_rows_runner.hpp): a grouped GEMM's ragged-rows call as a
// few cuBLASLt matmuls in pointer-array batch mode (CUBLASLT_BATCH_MODE_POINTER_ARRAY), one per
// tile size, on the backend's stream 0.
//
// Why tiles: a batched matmul needs one shape for all its entries, and the groups' row counts
// differ. tile_rows() cuts every group into tiles of one power-of-two row count (capped at
// kTileRowsCap), the last tile overlapping the one before instead of leaving the group, so a
// call is one batched matmul per distinct tile size (one for equal groups; a few for skewed
// ones), each group's weights read by one matmul only, and no tile ever writes outside its
// group. A loop of GEMMs (one per group) leaves most of the GPU idle on small groups; one
// cublasGemmGroupedBatchedEx ran at about 300 TFLOP/s on the H200 whatever the sizes
// (docs/PERFORMANCE.md).
//
// Row-major to column-major as cublas_grouped.cpp: cuBLASLt's A is rhs[g] (m = N), its B the
// tile's lhs rows (n = t), k = K, C = D the tile's out rows (ldc = N). The A/B/D pointer
// arrays are device memory: per call they go in one asynchronous copy from a pinned staging
// slot (staging_ring.hpp), together with each tile's group index for the bias.
//
// The bias: cuBLASLt's bias epilogue (added in fp32 to the accumulator and rounded once, as the
// loop's cuBLASLt GEMMs do) reads one bias vector per batch entry at a fixed stride
// (CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE), so a small kernel first gathers a table of one bias
// row per tile. Overlapping rows are written by two tiles of one matmul with the same inputs,
// algorithm and epilogue, neither reading D: C is not read (beta = 0) and the heuristic may
// not pick an in-place split-K, which keeps partial sums in D (see build()).
//
// Algorithms: cublasLtMatmulAlgoGetHeuristic's first answer per (tile rows, batch count), kept
// in a cache (cleared when it grows past kCacheEntries), since the batch count is a layout
// attribute the heuristic reads.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/backend.hpp"
#include "grouped_bias.hpp"
#include "ragged_rows_runner.hpp"
#include "staging_ring.hpp"

namespace cgemm::grouped {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // as the backend's cuBLASLt GEMMs
constexpr size_t kCacheEntries = 256;

cudaDataType_t lt_type(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

class CublasLtTiles final : public RaggedRowsRunner {
 public:
  CublasLtTiles(Backend& be, const RaggedRowsGeometry& g, bool with_bias, const std::string& name)
      : g_(g), with_bias_(with_bias), where_("grouped GEMM '" + name + "' (path cublaslt_tiles)") {
    const std::string why = cublaslt_tiles_refusal(g);
    if (!why.empty()) throw Error(where_ + ": not run: " + why);
    stream_ = static_cast<cudaStream_t>(be.native_stream());
    max_tiles_ = max_row_tiles(g.m_total, g.groups, kTileRowsCap);
    // Slot layout: 3 pointers per tile (A, B, D; packed class by class), then an int32 group
    // index per tile.
    const auto tiles = static_cast<size_t>(max_tiles_);
    ring_ = std::make_unique<StagingRing>(tiles * (3 * sizeof(void*) + sizeof(int32_t)), stream_,
                                          where_);
    try {
      check_lt(cublasLtCreate(&handle_), "cublasLtCreate");
      check_cuda(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)",
                 where_);
      if (with_bias_) {
        const size_t bytes = tiles * static_cast<size_t>(g.n) * dtype_size(g.dtype);
        check_cuda(cudaMalloc(&bias_table_, bytes),
                   "cudaMalloc(" + std::to_string(bytes) + " bytes of per-tile bias)", where_);
      }
    } catch (...) {
      release();
      throw;
    }
  }

  ~CublasLtTiles() override { release(); }
  CublasLtTiles(const CublasLtTiles&) = delete;
  CublasLtTiles& operator=(const CublasLtTiles&) = delete;

  bool run(std::span<const int32_t> sizes, const void* lhs, const void* rhs, const void* bias,
           void* out) override {
    if (g_.m_total == 0 || g_.n == 0) return true;  // nothing to write
    const std::vector<TileClass> classes = tile_rows(sizes, kTileRowsCap);
    if (!aligned(classes, lhs, rhs, out)) return false;
    const StagingRing::Slot slot = ring_->acquire();
    size_t total = 0;
    for (const TileClass& c : classes) total += c.tiles.size();
    auto* ptrs = reinterpret_cast<const void**>(slot.host);
    auto* groups = reinterpret_cast<int32_t*>(ptrs + 3 * total);
    const size_t in = dtype_size(g_.dtype);
    const auto* a = static_cast<const char*>(lhs);
    const auto* b = static_cast<const char*>(rhs);
    auto* o = static_cast<char*>(out);
    size_t at = 0;  // the class's first tile
    for (const TileClass& c : classes) {
      const size_t count = c.tiles.size();
      for (size_t i = 0; i < count; ++i) {
        const RowTile& t = c.tiles[i];
        ptrs[3 * at + i] = b + static_cast<size_t>(t.group * g_.k * g_.n) * in;
        ptrs[3 * at + count + i] =
            a + static_cast<size_t>(g_.lhs_trans ? t.first : t.first * g_.k) * in;
        ptrs[3 * at + 2 * count + i] = o + static_cast<size_t>(t.first * g_.n) * in;
        groups[at + i] = static_cast<int32_t>(t.group);
      }
      at += count;
    }
    const size_t ptr_bytes = 3 * total * sizeof(void*);
    ring_->commit(slot, bias != nullptr ? ptr_bytes + total * sizeof(int32_t) : ptr_bytes);
    if (bias != nullptr) {
      check_cuda(launch_gather_tile_bias(bias_table_, bias,
                                         reinterpret_cast<const int32_t*>(slot.device + ptr_bytes),
                                         static_cast<int64_t>(total), g_.n, in, stream_),
                 "the tile bias kernel (" + std::to_string(total) + " tiles, N " +
                     std::to_string(g_.n) + ")",
                 where_);
    }
    const float alpha = 1.0f;
    const float beta = 0.0f;
    at = 0;
    for (const TileClass& c : classes) {
      const size_t count = c.tiles.size();
      Entry& e = entry(c.rows, static_cast<int>(count), bias != nullptr);
      if (bias != nullptr) {
        const void* rows =
            static_cast<const char*>(bias_table_) + at * static_cast<size_t>(g_.n) * in;
        check_lt(cublasLtMatmulDescSetAttribute(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &rows,
                                                sizeof(rows)),
                 "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
      }
      const auto* dev = reinterpret_cast<const void* const*>(slot.device) + 3 * at;
      check_lt(cublasLtMatmul(handle_, e.desc, &alpha, dev, e.a, dev + count, e.b, &beta,
                              dev + 2 * count, e.d,
                              const_cast<void*>(static_cast<const void*>(dev + 2 * count)), e.d,
                              &e.algo, workspace_, kWorkspaceBytes, stream_),
               "cublasLtMatmul(" + std::to_string(count) + " tiles of " + std::to_string(c.rows) +
                   " rows, N " + std::to_string(g_.n) + ", K " + std::to_string(g_.k) + ")");
      at += count;
    }
    return true;
  }

 private:
  // A matmul description, its layouts and its algorithm for `count` tiles of `rows` rows.
  struct Entry {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };

  Entry& entry(int64_t rows, int count, bool bias) {
    const auto key = std::make_pair(rows, count);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    if (cache_.size() >= kCacheEntries) clear_cache();
    Entry e;
    try {
      build(e, rows, count, bias);
    } catch (...) {
      destroy(e);
      throw;
    }
    return cache_.emplace(key, e).first->second;
  }

  void build(Entry& e, int64_t rows, int count, bool bias) {
    const cudaDataType_t t = lt_type(g_.dtype);
    check_lt(cublasLtMatmulDescCreate(&e.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
             "cublasLtMatmulDescCreate");
    const cublasOperation_t op_a = g_.rhs_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = g_.lhs_trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(e.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
    set(e.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
    if (bias) {
      set(e.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set(e.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(t));
      // The heuristic reads the bias pointer's alignment from its value (cublasLt.h,
      // BIAS_POINTER), and a call moves it per class to the class's first table row, `at`
      // rows of N * size bytes in: aligned only to the lowest set bit of a row's bytes (at
      // least 16: aligned() requires it). Give the heuristic a pointer with exactly that
      // alignment, never the table base's 256 bytes, so its algorithm suits every class.
      const auto row_bytes = static_cast<uint64_t>(g_.n) * dtype_size(g_.dtype);
      const uint64_t weakest = row_bytes & (~row_bytes + 1);
      const void* probe = static_cast<const char*>(bias_table_) + (weakest < 256 ? weakest : 0);
      set(e.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, probe);
      set(e.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, g_.n);
    }
    // Column-major views (see the top of this file).
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    const int64_t n = g_.n, k = g_.k;
    if (g_.rhs_trans) {
      layout(e.a, t, u(k), u(n), k, count);  // rhs[g] [N, K] row-major
    } else {
      layout(e.a, t, u(n), u(k), n, count);  // rhs[g] [K, N]
    }
    if (g_.lhs_trans) {
      layout(e.b, t, u(rows), u(k), g_.m_total, count);  // a column block of lhs [K, M]
    } else {
      layout(e.b, t, u(k), u(rows), k, count);  // rows of lhs [M, K]
    }
    layout(e.d, t, u(n), u(rows), n, count);
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t rc = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    // No in-place split-K: it accumulates partial sums in D itself (cublasLt.h,
    // CUBLASLT_REDUCTION_SCHEME_INPLACE), and overlapping tiles are two batch entries with the
    // same D rows, each of which would add into the other's partials. Reductions in the
    // workspace (per entry, then written once) and no split stay allowed.
    const uint32_t schemes =
        CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    if (rc == CUBLAS_STATUS_SUCCESS) {
      rc = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                &schemes, sizeof(schemes));
    }
    // The heuristic assumes A, B, C and D 256-byte aligned unless told (cublasLt.h,
    // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, default 256), and in pointer-array mode
    // cublasLtMatmul cannot check the pointers, which sit on the device: a tile's rows are
    // only the 16 bytes aligned() guarantees.
    for (const cublasLtMatmulPreferenceAttributes_t attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      const uint32_t bytes = 16;
      if (rc == CUBLAS_STATUS_SUCCESS) {
        rc = cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes));
      }
    }
    if (rc == CUBLAS_STATUS_SUCCESS) {
      rc = cublasLtMatmulAlgoGetHeuristic(handle_, e.desc, e.a, e.b, e.d, e.d, pref, 1, &result,
                                          &found);
    }
    static_cast<void>(cublasLtMatmulPreferenceDestroy(pref));
    check_lt(rc, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) {
      throw Error(where_ + ": cuBLASLt has no pointer-array algorithm for " +
                  std::to_string(count) + " tiles of " + std::to_string(rows) + " rows (N " +
                  std::to_string(n) + ", K " + std::to_string(k) + ", " +
                  std::string(dtype_name(g_.dtype)) + (bias ? ", bias" : "") + ")");
    }
    e.algo = result.algo;
  }

  void layout(cublasLtMatrixLayout_t& l, cudaDataType_t t, uint64_t r, uint64_t c, int64_t ld,
              int count) {
    check_lt(cublasLtMatrixLayoutCreate(&l, t, r, c, ld), "cublasLtMatrixLayoutCreate");
    const auto mode = static_cast<int32_t>(CUBLASLT_BATCH_MODE_POINTER_ARRAY);
    check_lt(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode)),
        "cublasLtMatrixLayoutSetAttribute(BATCH_MODE)");
    check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                              sizeof(count)),
             "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
  }

  template <typename T>
  void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
    check_lt(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)),
             "cublasLtMatmulDescSetAttribute(" + std::to_string(static_cast<int>(attr)) + ")");
  }

  // Pointer-array kernels read each entry's pointers as 16-byte aligned (as the cuBLAS grouped
  // kernels, which fault otherwise): a call whose tiles do not all start on 16 bytes, as an
  // lhs [K, M] tile at an odd row does, runs the loop instead.
  bool aligned(const std::vector<TileClass>& classes, const void* lhs, const void* rhs,
               const void* out) const {
    const auto in = static_cast<int64_t>(dtype_size(g_.dtype));
    const auto ok = [](const void* base, int64_t bytes) {
      return (reinterpret_cast<uintptr_t>(base) + static_cast<uint64_t>(bytes)) % 16 == 0;
    };
    const int64_t lds[] = {g_.rhs_trans ? g_.k : g_.n, g_.lhs_trans ? g_.m_total : g_.k, g_.n};
    for (const int64_t ld : lds) {
      if ((ld * in) % 16 != 0) return false;
    }
    if (!ok(rhs, 0) || !ok(lhs, 0) || !ok(out, 0)) return false;
    for (const TileClass& c : classes) {
      for (const RowTile& t : c.tiles) {
        if (!ok(lhs, (g_.lhs_trans ? t.first : t.first * g_.k) * in)) return false;
      }
    }
    return true;  // rhs[g] and out rows then sit at multiples of 16 bytes, too
  }

  void check_lt(cublasStatus_t rc, const std::string& call) const {
    if (rc == CUBLAS_STATUS_SUCCESS) return;
    throw Error(where_ + ": " + call + " failed: " + cublasLtGetStatusName(rc) + " (" +
                cublasLtGetStatusString(rc) + ")");
  }

  static void destroy(Entry& e) noexcept {
    if (e.a != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(e.a));
    if (e.b != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(e.b));
    if (e.d != nullptr) static_cast<void>(cublasLtMatrixLayoutDestroy(e.d));
    if (e.desc != nullptr) static_cast<void>(cublasLtMatmulDescDestroy(e.desc));
    e = Entry{};
  }

  void clear_cache() noexcept {
    for (auto& [key, e] : cache_) destroy(e);
    cache_.clear();
  }

  void release() noexcept {
    ring_.reset();  // waits for the copies and the matmuls that read the pointer arrays
    clear_cache();
    if (handle_ != nullptr) static_cast<void>(cublasLtDestroy(handle_));
    handle_ = nullptr;
    if (workspace_ != nullptr || bias_table_ != nullptr) {
      static_cast<void>(cudaStreamSynchronize(stream_));
    }
    if (workspace_ != nullptr) static_cast<void>(cudaFree(workspace_));
    if (bias_table_ != nullptr) static_cast<void>(cudaFree(bias_table_));
    workspace_ = bias_table_ = nullptr;
  }

  RaggedRowsGeometry g_;
  bool with_bias_;
  std::string where_;
  cudaStream_t stream_ = nullptr;
  int64_t max_tiles_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  void* bias_table_ = nullptr;  // [max_tiles_, N] of the output dtype, with a bias only
  std::unique_ptr<StagingRing> ring_;
  std::map<std::pair<int64_t, int>, Entry> cache_;
};

}  // namespace

std::unique_ptr<RaggedRowsRunner> make_cublaslt_tiles(Backend& be, const RaggedRowsGeometry& g,
                                                      bool with_bias, const std::string& name) {
  return std::make_unique<CublasLtTiles>(be, g, with_bias, name);
}

}  // namespace cgemm::grouped
