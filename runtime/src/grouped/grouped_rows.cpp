// The grouped GEMM's ragged-rows rules (grouped_rows.hpp).

#include <algorithm>
#include <bit>
#include <limits>

#include "grouped_rows.hpp"

namespace cgemm::grouped {

RaggedRowsGeometry ragged_rows_geometry(const GroupedGemmShape& s) {
  RaggedRowsGeometry g;
  g.groups = s.groups;
  g.m_total = s.extent;
  g.n = s.n;
  g.k = s.k;
  g.lhs_trans = s.lhs_trans;
  g.rhs_trans = s.rhs_trans;
  g.dtype = s.in_dtype;
  g.rhs_dtype = s.rhs_dtype;
  g.out_dtype = s.out_dtype;
  g.scaled = s.scaled;
  g.fast_accumulation = s.fast_accumulation;
  return g;
}

namespace {

// One dtype in and out, or why not (the cuBLAS grouped and device tiles runners).
std::string one_dtype_refusal(const RaggedRowsGeometry& g) {
  if (g.scaled) return "FP8 inputs run on the loop and cublaslt_tiles paths only";
  if (g.rhs_dtype != g.dtype || g.out_dtype != g.dtype) {
    return "the output dtype " + std::string(dtype_name(g.out_dtype)) +
           " differs from the inputs' " + std::string(dtype_name(g.dtype));
  }
  return "";
}

}  // namespace

std::string cublas_grouped_refusal(const RaggedRowsGeometry& g) {
  if (std::string why = one_dtype_refusal(g); !why.empty()) return why;
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
  const auto half_or_float = [](DType t) {
    return t == DType::kBFloat16 || t == DType::kFloat16 || t == DType::kFloat32;
  };
  if (g.scaled) {
    if (!is_fp8(g.dtype) || !is_fp8(g.rhs_dtype) || !half_or_float(g.out_dtype)) {
      return "FP8 runs FP8 lhs and rhs into bfloat16, float16 or float32, not " +
             std::string(dtype_name(g.dtype)) + " x " + std::string(dtype_name(g.rhs_dtype)) +
             " -> " + std::string(dtype_name(g.out_dtype));
    }
    if (g.lhs_trans || !g.rhs_trans) return "FP8 runs lhs [M, K] and rhs [G, N, K] only";
  } else if (std::string why = one_dtype_refusal(g); !why.empty()) {
    return why;
  } else if (!half_or_float(g.dtype)) {
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

int64_t device_tile_rows(int64_t m_total) {
  int64_t t = kSmallTileRowsCap;
  while (t > 1 && t > m_total) t /= 2;
  return t;
}

std::string cublaslt_device_tiles_refusal(const RaggedRowsGeometry& g) {
  if (std::string why = one_dtype_refusal(g); !why.empty()) return why;
  if (std::string why = cublaslt_tiles_refusal(g); !why.empty()) return why;
  if (g.lhs_trans) {
    return "lhs [K, M] (a group's rows start at any column of it, which the pointer-array "
           "matmul cannot read aligned); give lhs [M, K]";
  }
  if (g.m_total < 1) return "M = 0 (no rows to tile)";
  if (g.n < 1) return "N = 0 (nothing to write)";
  const auto elem = static_cast<int64_t>(dtype_size(g.dtype));
  if ((g.k * elem) % 16 != 0 || (g.n * elem) % 16 != 0) {
    return "K " + std::to_string(g.k) + " and N " + std::to_string(g.n) + " must be multiples of " +
           std::to_string(16 / elem) + " (rows on 16 bytes, as the matmul reads them)";
  }
  if (g.m_total / device_tile_rows(g.m_total) + g.groups > std::numeric_limits<int>::max()) {
    return "more tiles than an int32 batch count";
  }
  return "";
}

bool aligned16(const void* base, int64_t bytes) {
  return (reinterpret_cast<uintptr_t>(base) + static_cast<uint64_t>(bytes)) % 16 == 0;
}

bool bases_and_lds_aligned16(const RaggedRowsGeometry& g, const void* lhs, const void* rhs,
                             const void* out) {
  const auto size = [](DType t) { return static_cast<int64_t>(dtype_size(t)); };
  if (((g.rhs_trans ? g.k : g.n) * size(g.rhs_dtype)) % 16 != 0 ||
      ((g.lhs_trans ? g.m_total : g.k) * size(g.dtype)) % 16 != 0 ||
      (g.n * size(g.out_dtype)) % 16 != 0) {
    return false;
  }
  return aligned16(lhs, 0) && aligned16(rhs, 0) && aligned16(out, 0);
}

std::vector<TileClass> tile_rows(std::span<const int32_t> sizes, int64_t cap, TileOverlap overlap) {
  std::vector<TileClass> classes;  // by descending rows
  const auto add = [&](int64_t rows, RowTile tile) {
    auto it = std::find_if(classes.begin(), classes.end(),
                           [&](const TileClass& c) { return c.rows <= rows; });
    if (it == classes.end() || it->rows != rows) it = classes.insert(it, TileClass{rows, {}});
    it->tiles.push_back(tile);
  };
  int64_t off = 0;
  for (size_t gi = 0; gi < sizes.size(); ++gi) {
    const int64_t m = sizes[gi];
    const auto g = static_cast<int64_t>(gi);
    if (m > 0) {
      const int64_t t =
          std::min(cap, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(m))));
      int64_t r = 0;
      for (; r + t <= m; r += t) add(t, {g, off + r});
      if (r < m && overlap == TileOverlap::kAllowed) {
        add(t, {g, off + m - t});
      } else {
        for (int64_t piece = t / 2; r < m; piece /= 2) {  // the rest's set bits, largest first
          if (r + piece <= m) {
            add(piece, {g, off + r});
            r += piece;
          }
        }
      }
    }
    off += m;
  }
  return classes;
}

int64_t max_row_tiles(int64_t m_total, int64_t groups, int64_t cap, TileOverlap overlap) {
  if (overlap == TileOverlap::kAllowed) return m_total / cap + 2 * groups;
  const auto log2_cap = static_cast<int64_t>(std::bit_width(static_cast<uint64_t>(cap)) - 1);
  return m_total / cap + groups * (1 + log2_cap);
}

int64_t rows_computed(const std::vector<TileClass>& classes) {
  int64_t rows = 0;
  for (const TileClass& c : classes) rows += c.rows * static_cast<int64_t>(c.tiles.size());
  return rows;
}

std::vector<TileClass> choose_tiling(std::span<const int32_t> sizes, TileOverlap overlap) {
  std::vector<TileClass> large = tile_rows(sizes, kTileRowsCap, overlap);
  if (overlap == TileOverlap::kNone) return large;
  std::vector<TileClass> small = tile_rows(sizes, kSmallTileRowsCap, overlap);
  // 5%: the H200's measurement at kTileRowsCap (grouped_rows.hpp).
  return rows_computed(small) * 105 <= rows_computed(large) * 100 ? small : large;
}

}  // namespace cgemm::grouped
