#pragma once
// A second way to run a grouped GEMM's ragged-rows form on the CUDA backend, behind one small
// interface so GroupedGemmPlan (grouped_plan.cpp) stays free of cuBLAS: the runner gets a
// call whose sizes and pointers the plan has already checked and issues it on the backend's
// stream 0. Private to runtime/.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"

namespace cgemm {
class Backend;
}

namespace cgemm::grouped {

/// The fixed geometry of a plan's ragged-rows calls (row-major, as GemmTask): lhs [M, K]
/// (lhs_trans: [K, M]), rhs [G, K, N] (rhs_trans: [G, N, K]), out [M, N], bias [G, N] or none;
/// in and out of `dtype` (bfloat16 or float16).
struct RaggedRowsGeometry {
  int64_t groups = 0, m_total = 0, n = 0, k = 0;
  bool lhs_trans = false, rhs_trans = false;
  DType dtype = DType::kBFloat16;
};

class RaggedRowsRunner {
 public:
  virtual ~RaggedRowsRunner() = default;
  /// out rows of group g = lhs rows of g @ rhs[g] (+ bias[g]) for every g; `sizes` holds G
  /// sizes, none negative, summing to M (checked by the caller). Asynchronous on stream 0.
  /// Returns false, having issued nothing, when this call's group pointers do not suit the
  /// runner (the caller then runs the loop); true when it issued the call.
  virtual bool run(std::span<const int32_t> sizes, const void* lhs, const void* rhs,
                   const void* bias, void* out) = 0;
};

/// The tiles runner's largest tile (rows): see cublaslt_tiles.cpp. Not measured yet (the tiles
/// have not run on a GPU; docs/PERFORMANCE.md has no tiles row).
inline constexpr int64_t kTileRowsCap = 256;

/// One tile of a ragged-rows call: `rows` rows of group `group`, from absolute row `first`.
struct RowTile {
  int64_t group = 0;
  int64_t first = 0;
};

/// The tiles of one cuBLASLt batched call: every tile has `rows` rows (a power of two).
struct TileClass {
  int64_t rows = 0;
  std::vector<RowTile> tiles;
};

/// Covers every row of every non-empty group with tiles of one size per group:
/// t_g = min(cap, the largest power of two <= size_g), tiles at rows 0, t_g, 2 t_g, ... of the
/// group while they fit, and the last one at size_g - t_g, so a tile never leaves its group;
/// the last tile may overlap the one before (those rows are computed twice, by the same call
/// with the same inputs: the same bits, written twice). Classes come out by descending rows,
/// tiles in group order. `cap` is a power of two >= 1. At most M / cap + 2 G tiles.
std::vector<TileClass> tile_rows(std::span<const int32_t> sizes, int64_t cap);

/// The bound above on tile_rows's tile count for M rows in G groups.
int64_t max_row_tiles(int64_t m_total, int64_t groups, int64_t cap);

/// "" when the cuBLAS grouped runner runs `g`, else why not (a clause for an error message).
std::string cublas_grouped_refusal(const RaggedRowsGeometry& g);

/// "" when the cuBLASLt tiles runner runs `g`, else why not (a clause for an error message).
std::string cublaslt_tiles_refusal(const RaggedRowsGeometry& g);

/// The cuBLASLt tiles runner (cublaslt_tiles.cpp) on `be`'s stream 0, with its handle,
/// workspace and staging made now on the current device; `with_bias` sizes its bias table.
/// Throws cgemm::Error where cgemm was built without CUDA or `g` is refused.
std::unique_ptr<RaggedRowsRunner> make_cublaslt_tiles(Backend& be, const RaggedRowsGeometry& g,
                                                      bool with_bias, const std::string& name);

/// The cublasGemmGroupedBatchedEx runner on `be`'s stream 0 (be is the CUDA backend), with its
/// handle and staging made now on the current device. `name` names the plan in errors.
/// Throws cgemm::Error where cgemm was built without CUDA or `g` is refused.
std::unique_ptr<RaggedRowsRunner> make_cublas_grouped(Backend& be, const RaggedRowsGeometry& g,
                                                      const std::string& name);

}  // namespace cgemm::grouped
