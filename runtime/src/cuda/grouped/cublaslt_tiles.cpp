// The cuBLASLt tiles runner (ragged_rows_runner.hpp): a grouped GEMM's ragged-rows call as a
// few cuBLASLt matmuls in pointer-array batch mode (CUBLASLT_BATCH_MODE_POINTER_ARRAY), one per
// tile size, on the call's stream.
//
// Why tiles: a batched matmul needs one shape for all its entries, and the groups' row counts
// differ. choose_tiling() cuts every group into power-of-two row tiles that never leave the
// group, so a call is one batched matmul per distinct tile size: one for equal groups, a few
// for skewed ones. A loop of GEMMs (one per group) leaves most of the GPU idle on small groups
// (64 groups of 256 rows: 0.48 ms against 0.145 for the tiles on the H200), and one
// cublasGemmGroupedBatchedEx ran at about 300 TFLOP/s whatever the sizes (docs/PERFORMANCE.md).
//
// Each class is one pointer-array matmul (lt_pointer_array.hpp). Its A/B/D pointer arrays are
// device memory: per call they go in one asynchronous copy from a pinned staging slot
// (staging_ring.hpp), each class's arrays on 16 bytes.
//
// Without a bias, the last tile of a group may overlap the one before (TileOverlap::kAllowed):
// fewer, larger tiles. Shared rows are computed twice by one matmul from the same inputs with
// beta = 0 (C never read) and no in-place split-K (lt_pointer_array.cpp); on the H200 every row
// agreed bit for bit with the loop's (docs/data/2026-12-03-grouped-tiles/probe.log). With a bias:
// cuBLASLt has no bias epilogue in pointer-array mode (the heuristic answers
// CUBLAS_STATUS_NOT_SUPPORTED on the H200), so, as the cuBLAS grouped path, a kernel first writes
// each row's group bias into out and the matmuls add into it (beta = 1, C = D): the bias is
// added in fp32 and rounded once, as the loop's epilogue. Rows read back must be in one tile
// only, so those calls tile without overlap (TileOverlap::kNone).
//
// FP8 (bfloat16, float16 or float32 out): each tile's products are scaled by its group's two
// scale_inv through the alpha vector (tile_scales.hpp): a kernel writes N alphas per tile from
// the tile groups staged with the pointers, and the matmuls read them (beta on the host).
//
// Algorithms: cublasLtMatmulAlgoGetHeuristic's first answer per (tile rows, batch count), kept
// in a cache (cleared when it grows past kCacheEntries), since the batch count is a layout
// attribute the heuristic reads. Every class's algorithm is found before anything is issued;
// where cuBLASLt has none, the call issues nothing and runs the loop (loop_fallbacks()).

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"
#include "grouped_bias.hpp"
#include "lt_pointer_array.hpp"
#include "ragged_rows_runner.hpp"
#include "staging_ring.hpp"
#include "tile_scales.hpp"

namespace cgemm::grouped {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // as the backend's cuBLASLt GEMMs
constexpr size_t kCacheEntries = 256;
// Tile sizes are powers of two up to kTileRowsCap (256): at most 9 classes per call.
constexpr size_t kMaxClasses = 9;

class CublasLtTiles final : public RaggedRowsRunner {
 public:
  CublasLtTiles(const RaggedRowsGeometry& g, bool with_bias, const std::string& name)
      : g_(g), where_("grouped GEMM '" + name + "' (path cublaslt_tiles)") {
    const std::string why = cublaslt_tiles_refusal(g);
    if (!why.empty()) throw Error(where_ + ": not run: " + why);
    // Room for either cap's tiles; each class's three arrays start on 16 bytes (one pointer of
    // padding each, at most kMaxClasses classes).
    const TileOverlap overlap = with_bias ? TileOverlap::kNone : TileOverlap::kAllowed;
    const auto tiles = static_cast<size_t>(
        std::max(max_row_tiles(g.m_total, g.groups, kTileRowsCap, overlap),
                 max_row_tiles(g.m_total, g.groups, kSmallTileRowsCap, overlap)));
    ends_at_ = (3 * (tiles + kMaxClasses)) * sizeof(void*);
    groups_at_ = ends_at_ + static_cast<size_t>(g.groups) * sizeof(int64_t);
    ring_ = std::make_unique<StagingRing>(groups_at_ + (g.scaled ? tiles * sizeof(int32_t) : 0),
                                          where_);
    try {
      check_lt(cublasLtCreate(&handle_), "cublasLtCreate");
      check_cuda(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)",
                 where_);
      if (g.scaled) {
        // One set per staging slot: calls may come on different streams, and the slot's
        // event is what says a call's matmuls have read them.
        alpha_slot_floats_ = tiles * static_cast<size_t>(g.n);
        check_cuda(cudaMalloc(reinterpret_cast<void**>(&alpha_),
                              StagingRing::kSlots * alpha_slot_floats_ * sizeof(float)),
                   "cudaMalloc(FP8 tile alphas: " + std::to_string(StagingRing::kSlots) + " x " +
                       std::to_string(tiles) + " tiles x N " + std::to_string(g.n) + ")",
                   where_);
      }
    } catch (...) {
      release();
      throw;
    }
  }

  ~CublasLtTiles() override { release(); }
  CublasLtTiles(const CublasLtTiles&) = delete;
  CublasLtTiles& operator=(const CublasLtTiles&) = delete;

  bool run(std::span<const int32_t> sizes, const int32_t* /*device_sizes*/, const void* lhs,
           const void* rhs, const void* bias, void* out, const GroupScales& scales,
           cudaStream_t stream) override {
    if (g_.m_total == 0 || g_.n == 0) return true;  // nothing to write
    const bool with_bias = bias != nullptr;
    const std::vector<TileClass> classes =
        choose_tiling(sizes, with_bias ? TileOverlap::kNone : TileOverlap::kAllowed);
    if (classes.size() > kMaxClasses || !aligned(classes, lhs, rhs, out)) return false;
    // Every class's algorithm before anything is issued: a class without one sends the whole
    // call to the loop. The cache is trimmed here, never while this call's entries are held.
    if (cache_.size() + classes.size() > kCacheEntries) clear_cache();
    std::vector<const Entry*> entries;
    for (const TileClass& c : classes) {
      const Entry* e = entry(c.rows, static_cast<int>(c.tiles.size()));
      if (e == nullptr) return false;
      entries.push_back(e);
    }
    const StagingRing::Slot slot = ring_->acquire();
    auto* ptrs = reinterpret_cast<const void**>(slot.host);
    const size_t in = dtype_size(g_.dtype), in_rhs = dtype_size(g_.rhs_dtype);
    const size_t out_size = dtype_size(g_.out_dtype);
    const auto* a = static_cast<const char*>(lhs);
    const auto* b = static_cast<const char*>(rhs);
    auto* o = static_cast<char*>(out);
    auto* tile_groups = reinterpret_cast<int32_t*>(slot.host + groups_at_);
    std::vector<size_t> starts;      // each class's first pointer
    std::vector<size_t> first_tile;  // each class's first tile, counted over the classes
    size_t at = 0, tiles = 0;
    for (const TileClass& c : classes) {
      const size_t count = c.tiles.size();
      const size_t stride = (count + 1) / 2 * 2;  // 16 bytes per two pointers
      starts.push_back(at);
      first_tile.push_back(tiles);
      for (size_t i = 0; i < count; ++i) {
        const RowTile& t = c.tiles[i];
        ptrs[at + i] = b + static_cast<size_t>(t.group * g_.k * g_.n) * in_rhs;
        ptrs[at + stride + i] =
            a + static_cast<size_t>(g_.lhs_trans ? t.first : t.first * g_.k) * in;
        ptrs[at + 2 * stride + i] = o + static_cast<size_t>(t.first * g_.n) * out_size;
        if (g_.scaled) tile_groups[tiles + i] = static_cast<int32_t>(t.group);
      }
      at += 3 * stride;
      tiles += count;
    }
    size_t bytes = at * sizeof(void*);
    if (with_bias) {
      auto* row_ends = reinterpret_cast<int64_t*>(slot.host + ends_at_);
      int64_t end = 0;
      for (size_t gi = 0; gi < sizes.size(); ++gi) row_ends[gi] = end += sizes[gi];
      bytes = ends_at_ + sizes.size() * sizeof(int64_t);
    }
    if (g_.scaled) bytes = groups_at_ + tiles * sizeof(int32_t);
    ring_->commit(slot, bytes, stream);
    float* const alphas = g_.scaled ? alpha_ + slot.index * alpha_slot_floats_ : nullptr;
    if (g_.scaled) {
      check_cuda(
          launch_fill_tile_alpha(alphas, reinterpret_cast<const int32_t*>(slot.device + groups_at_),
                                 static_cast<int64_t>(tiles), g_.n, scales.lhs, scales.rhs,
                                 scales.stride, stream),
          "the FP8 tile alpha kernel (" + std::to_string(tiles) + " tiles, N " +
              std::to_string(g_.n) + ")",
          where_);
    }
    if (with_bias) {
      check_cuda(launch_fill_group_bias(out, bias,
                                        reinterpret_cast<const int64_t*>(slot.device + ends_at_),
                                        g_.groups, g_.m_total, g_.n, g_.out_dtype, stream),
                 "the group bias kernel (M " + std::to_string(g_.m_total) + ", N " +
                     std::to_string(g_.n) + ")",
                 where_);
    }
    const float one = 1.0f;
    const float beta = with_bias ? 1.0f : 0.0f;
    for (size_t ci = 0; ci < classes.size(); ++ci) {
      const size_t count = classes[ci].tiles.size();
      const size_t stride = (count + 1) / 2 * 2;
      const Entry& e = *entries[ci];
      const auto* dev = reinterpret_cast<const void* const*>(slot.device) + starts[ci];
      void* d = const_cast<void*>(static_cast<const void*>(dev + 2 * stride));
      const float* alpha = g_.scaled ? alphas + first_tile[ci] * static_cast<size_t>(g_.n) : &one;
      check_lt(cublasLtMatmul(handle_, e.desc, alpha, dev, e.a, dev + stride, e.b, &beta, d, e.d, d,
                              e.d, &e.algo, workspace_, kWorkspaceBytes, stream),
               "cublasLtMatmul(" + std::to_string(count) + " tiles of " +
                   std::to_string(classes[ci].rows) + " rows, N " + std::to_string(g_.n) + ", K " +
                   std::to_string(g_.k) + ")");
    }
    ring_->done(slot, stream);
    return true;
  }

 private:
  using Entry = PointerArrayMatmul;  // for `count` tiles of `rows` rows

  // The cached entry for `count` tiles of `rows` rows; nullptr where cuBLASLt has no algorithm
  // for it (remembered, so the heuristic is asked once).
  const Entry* entry(int64_t rows, int count) {
    const auto key = std::make_pair(rows, count);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second.desc != nullptr ? &it->second : nullptr;
    Entry e;  // a remembered miss where it stays empty (desc null)
    static_cast<void>(
        make_pointer_array_matmul(handle_, g_, rows, count, kWorkspaceBytes, where_, e));
    it = cache_.emplace(key, e).first;
    return it->second.desc != nullptr ? &it->second : nullptr;
  }

  // Pointer-array kernels read each entry's pointers as 16-byte aligned (as the cuBLAS grouped
  // kernels, which fault otherwise): a call whose tiles do not all start on 16 bytes, as an
  // lhs [K, M] tile at an odd row does, runs the loop instead.
  bool aligned(const std::vector<TileClass>& classes, const void* lhs, const void* rhs,
               const void* out) const {
    if (!bases_and_lds_aligned16(g_, lhs, rhs, out)) return false;
    if (!g_.lhs_trans) return true;  // rows of lhs [M, K] sit on 16 bytes, as rhs[g], out rows
    const auto in = static_cast<int64_t>(dtype_size(g_.dtype));
    for (const TileClass& c : classes) {
      for (const RowTile& t : c.tiles) {
        if (!aligned16(lhs, t.first * in)) return false;
      }
    }
    return true;
  }

  void check_lt(cublasStatus_t rc, const std::string& call) const {
    grouped::check_lt(rc, where_, call);
  }

  void clear_cache() noexcept {
    for (auto& [key, e] : cache_) destroy(e);
    cache_.clear();
  }

  void release() noexcept {
    ring_.reset();  // waits for every call: its copies and the matmuls (which use the workspace)
    clear_cache();
    if (handle_ != nullptr) static_cast<void>(cublasLtDestroy(handle_));
    handle_ = nullptr;
    if (workspace_ != nullptr) static_cast<void>(cudaFree(workspace_));
    workspace_ = nullptr;
    if (alpha_ != nullptr) static_cast<void>(cudaFree(alpha_));
    alpha_ = nullptr;
  }

  RaggedRowsGeometry g_;
  std::string where_;
  size_t ends_at_ = 0;      // where a slot's G int64 row ends start (behind the pointers)
  size_t groups_at_ = 0;    // FP8: where a slot's int32 tile groups start (behind the row ends)
  float* alpha_ = nullptr;  // FP8: per staging slot, N alphas per tile (tile_scales.hpp)
  size_t alpha_slot_floats_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::unique_ptr<StagingRing> ring_;
  std::map<std::pair<int64_t, int>, Entry> cache_;  // desc null: no algorithm
};

}  // namespace

std::unique_ptr<RaggedRowsRunner> make_cublaslt_tiles(const RaggedRowsGeometry& g, bool with_bias,
                                                      const std::string& name) {
  return std::make_unique<CublasLtTiles>(g, with_bias, name);
}

}  // namespace cgemm::grouped
