// The rules of which ragged-rows calls the CUDA runners take, and the tiles runner's row
// tiling (ragged_rows_runner.hpp): compiled in every build, so the plan states them the same
// way with or without CUDA and the tiling is unit-tested on the CPU.

#include <algorithm>
#include <bit>
#include <limits>

#include "ragged_rows_runner.hpp"

namespace cgemm::grouped {

std::string cublas_grouped_refusal(const RaggedRowsGeometry& g) {
  if (g.dtype != DType::kBFloat16 && g.dtype != DType::kFloat16) {
    // cuBLAS would take float32 too, but the issue scopes this path to the half types it
    // names for cublasGemmGroupedBatchedEx; float32 keeps the loop's cuBLASLt GEMMs.
    return "it runs bfloat16 and float16 only, not " + std::string(dtype_name(g.dtype));
  }
  if (g.k == 0) return "K = 0 (an empty contraction, only the bias is written)";
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (g.m_total > kMax || g.n > kMax || g.k > kMax) {
    return "a dim over int32 (M " + std::to_string(g.m_total) + ", N " + std::to_string(g.n) +
           ", K " + std::to_string(g.k) + "; cuBLAS's sizes are int)";
  }
  return "";
}

std::string cublaslt_tiles_refusal(const RaggedRowsGeometry& g) {
  if (g.dtype != DType::kBFloat16 && g.dtype != DType::kFloat16 && g.dtype != DType::kFloat32) {
    return "it runs bfloat16, float16 and float32, not " + std::string(dtype_name(g.dtype));
  }
  if (g.k == 0) return "K = 0 (an empty contraction, only the bias is written)";
  // cuBLASLt's layouts take uint64 rows and columns but int64 leading dims; the batch count
  // is int32: M / cap + 2 G tiles stay far below it for any M within int32 rows.
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (g.m_total > kMax || g.n > kMax || g.k > kMax) {
    return "a dim over int32 (M " + std::to_string(g.m_total) + ", N " + std::to_string(g.n) +
           ", K " + std::to_string(g.k) + ")";
  }
  return "";
}

std::vector<TileClass> tile_rows(std::span<const int32_t> sizes, int64_t cap) {
  std::vector<TileClass> classes;  // by descending rows
  const auto class_of = [&](int64_t rows) -> TileClass& {
    auto it = std::find_if(classes.begin(), classes.end(),
                           [&](const TileClass& c) { return c.rows <= rows; });
    if (it == classes.end() || it->rows != rows) it = classes.insert(it, TileClass{rows, {}});
    return *it;
  };
  int64_t off = 0;
  for (size_t gi = 0; gi < sizes.size(); ++gi) {
    const int64_t m = sizes[gi];
    if (m > 0) {
      const int64_t t =
          std::min(cap, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(m))));
      TileClass& c = class_of(t);
      const auto g = static_cast<int64_t>(gi);
      for (int64_t r = 0; r + t < m; r += t) c.tiles.push_back({g, off + r});
      c.tiles.push_back({g, off + m - t});
    }
    off += m;
  }
  return classes;
}

int64_t max_row_tiles(int64_t m_total, int64_t groups, int64_t cap) {
  // A group of m >= cap rows: ceil(m / cap) <= m / cap + 1 tiles; of m < cap: at most 2.
  return m_total / cap + 2 * groups;
}

}  // namespace cgemm::grouped
