#pragma once
// The rules of a grouped GEMM's ragged-rows form that both sides of the backend boundary read:
// which calls the CUDA backend's runners (runtime/src/cuda/grouped/) take, stated at planning by
// GroupedGemmPlan (grouped/grouped_plan.cpp) and again by the runners, and the cuBLASLt tiles
// runner's row tiling. Compiled in every build, so the plan states them the same way with or
// without CUDA and the tiling is unit-tested on the CPU (tests/unit/test_row_tiles.cpp).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/grouped_task.hpp"

namespace cgemm::grouped {

/// The fixed geometry of a plan's ragged-rows calls (row-major, as GemmTask): lhs [M, K]
/// (lhs_trans: [K, M]), rhs [G, K, N] (rhs_trans: [G, N, K]), out [M, N], bias [G, N] or none.
/// lhs of `dtype`, rhs of `rhs_dtype`, out and bias of `out_dtype`: all one dtype, except
/// FP8 (`scaled`), whose lhs and rhs are FP8 codes with a scale_inv per group and operand.
struct RaggedRowsGeometry {
  int64_t groups = 0, m_total = 0, n = 0, k = 0;
  bool lhs_trans = false, rhs_trans = false;
  DType dtype = DType::kBFloat16;
  DType rhs_dtype = DType::kBFloat16;
  DType out_dtype = DType::kBFloat16;
  bool scaled = false;
  bool fast_accumulation = true;  // FP8: cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM
};

/// The ragged-rows geometry of `s` (s.form must be kRaggedRows): m_total is s.extent.
RaggedRowsGeometry ragged_rows_geometry(const GroupedGemmShape& s);

/// The tiles runner's tile caps (rows): 256, or 128 where that computes at least 5% fewer
/// rows (chosen per call by choose_tiling). Measured on the H200 (2026-12-03, cuBLASLt
/// pointer-array bf16 matmuls, docs/PERFORMANCE.md): 64 groups of 256 rows (K 2048, N 1408)
/// ran in 0.145 ms with 256-row tiles and 0.162 with 128; 64 skewed groups 0.219 with 256 (1.29x
/// the rows computed, by overlap) and 0.204 with 128 (1.19x); caps of 512 to 2048 gained at most
/// 1.5% on equal groups and lost on skewed ones; 64-row tiles ran at 60% of 256-row ones.
inline constexpr int64_t kTileRowsCap = 256;
inline constexpr int64_t kSmallTileRowsCap = 128;

/// One tile of a ragged-rows call: rows of group `group` from absolute row `first`.
struct RowTile {
  int64_t group = 0;
  int64_t first = 0;
};

/// The tiles of one cuBLASLt batched call: every tile has `rows` rows (a power of two).
struct TileClass {
  int64_t rows = 0;
  std::vector<RowTile> tiles;
};

/// Whether two tiles of a group may share rows (see tile_rows).
enum class TileOverlap {
  kAllowed,  // fewest tiles: rows computed twice by one matmul (no bias: nothing read back)
  kNone,     // every row in exactly one tile (a bias added into the output, beta = 1)
};

/// Covers every row of every non-empty group with power-of-two tiles that never leave their
/// group. t_g = min(cap, the largest power of two <= size_g); tiles at rows 0, t_g, 2 t_g, ...
/// of the group while they fit. The rest (fewer than t_g rows): with kAllowed, one more tile
/// at size_g - t_g, overlapping the one before (its shared rows computed twice by the same
/// matmul from the same inputs); with kNone, one tile per set bit of the rest, largest first.
/// Classes come out by descending rows, tiles in group order. `cap` is a power of two >= 1.
/// At most max_row_tiles(M, G, cap, overlap) tiles.
std::vector<TileClass> tile_rows(std::span<const int32_t> sizes, int64_t cap,
                                 TileOverlap overlap = TileOverlap::kAllowed);

/// The bound on tile_rows's tile count for M rows in G groups: M / cap + 2 G with kAllowed
/// (a group of m >= cap rows makes ceil(m / cap) tiles, a smaller one at most 2); with kNone
/// M / cap + G (1 + log2 cap) (whole tiles, plus one per set bit of the rest).
int64_t max_row_tiles(int64_t m_total, int64_t groups, int64_t cap, TileOverlap overlap);

/// Rows the tiles compute: the sum of rows times tiles over the classes (M when no tile
/// overlaps another).
int64_t rows_computed(const std::vector<TileClass>& classes);

/// The tiling a call runs: tile_rows with kTileRowsCap, or with kSmallTileRowsCap where that
/// computes at least 5% fewer rows (only with kAllowed: without overlap both compute M rows and
/// the larger tiles run faster).
std::vector<TileClass> choose_tiling(std::span<const int32_t> sizes, TileOverlap overlap);

/// Whether base + bytes is 16-byte aligned: what both CUDA runners need of every group or tile
/// pointer (cuBLAS's grouped kernels fault otherwise on the H200: see cublas_grouped.cpp).
bool aligned16(const void* base, int64_t bytes);

/// Whether `g`'s leading dims (rhs, lhs, out) are multiples of 16 bytes and the three base
/// pointers 16-byte aligned: with them, every rhs[g] and every out row is, too; lhs rows are
/// when lhs is not transposed.
bool bases_and_lds_aligned16(const RaggedRowsGeometry& g, const void* lhs, const void* rhs,
                             const void* out);

/// "" when the cuBLAS grouped runner runs `g`, else why not (a clause for an error message).
std::string cublas_grouped_refusal(const RaggedRowsGeometry& g);

/// "" when the cuBLASLt tiles runner runs `g`, else why not (a clause for an error message).
/// It runs one dtype in and out (bfloat16, float16, float32), or FP8 lhs [M, K] and rhs
/// [G, N, K] (Hopper's FP8 layout, which GroupedGemmPlan requires of FP8 anyway) into
/// bfloat16, float16 or float32, each tile scaled by its group's two scale_inv.
std::string cublaslt_tiles_refusal(const RaggedRowsGeometry& g);

/// The device tiles runner's tile rows T: kSmallTileRowsCap (128), or the largest power of two
/// <= M below that. Smaller than the tiles runner's 256 since each call computes up to G T
/// rows beyond M (cuda/grouped/device_tiles.hpp). On one H100 (2026-12-06, docs/
/// PERFORMANCE.md) the MoE cases ran 1.23x-1.76x the host tiles' time with it, 1.53x at 8
/// groups of 4096 rows where the extra rows are 3%: 256-row tiles for large groups are the next
/// thing to measure (not run on a GPU yet, so not chosen).
int64_t device_tile_rows(int64_t m_total);

/// "" when the cuBLASLt device tiles runner runs `g`, else why not: the tiles runner's rules,
/// plus lhs [M, K] (a group's first row of lhs [K, M] is any column, not 16-byte aligned in
/// general, and the host never sees it to check), leading dims on 16 bytes, M >= 1 and the
/// entry count within int32.
std::string cublaslt_device_tiles_refusal(const RaggedRowsGeometry& g);

}  // namespace cgemm::grouped
