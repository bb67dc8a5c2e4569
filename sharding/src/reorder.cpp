#include "cgemm/sharding/reorder.hpp"

#include <cstdint>
#include <cstring>
#include <string>

namespace cgemm {

namespace {

// The reshape's view of a checked shape: (dp, n, tpsp, block) for tpsp-leading, where
// block = m * prod(shape[2:]) is contiguous in both source and result.
struct ReorderGeometry {
  int64_t dp = 1, n = 0, tpsp = 1, block = 0;
  int64_t total = 0;
};

std::string kind_name(ReorderKind kind) {
  return kind == ReorderKind::kTpspLeading ? "_reorder_tpsp_leading" : "_reorder_dp_leading";
}

ReorderGeometry geometry(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size) {
  const std::string where = kind_name(kind) + " of shape " + shape_str(shape);
  if (shape.size() < 2) {
    throw PlanError(where + ": needs at least 2 dims (original_shape[1] is out of range)");
  }
  if (dp_size < 1 || tpsp_size < 1) {
    throw PlanError(where + ": dp_or_fsdp_axis_size()=" + std::to_string(dp_size) +
                    " and tpsp_axis_size()=" + std::to_string(tpsp_size) + " must be >= 1");
  }
  // gemm.py accepts a dim of 1 as well as a divisible one...
  if (!(shape[0] % dp_size == 0 || shape[0] == 1)) {
    throw PlanError(where + ": Original_shape[0]=" + std::to_string(shape[0]) +
                    " is not divisible by dp_or_fsdp_axis_size()=" + std::to_string(dp_size));
  }
  if (!(shape[1] % tpsp_size == 0 || shape[1] == 1)) {
    throw PlanError(where + ": Original_shape[1]=" + std::to_string(shape[1]) +
                    " is not divisible by tpsp_axis_size()=" + std::to_string(tpsp_size));
  }
  ReorderGeometry g;
  g.dp = dp_size;
  g.tpsp = tpsp_size;
  // ...but then reshapes to int(shape[0] / dp) rows, which is 0 for a dim of 1 split more
  // than once, so the reshape only succeeds when the element counts still agree.
  g.n = shape[0] / dp_size;
  const int64_t m = shape[1] / tpsp_size;
  int64_t rest = 1;
  for (size_t d = 2; d < shape.size(); ++d) rest = checked_mul(rest, shape[d], where);
  g.block = checked_mul(m, rest, where);
  g.total = num_elements(shape);
  const int64_t reshaped =
      checked_mul(checked_mul(checked_mul(g.dp, g.n, where), g.tpsp, where), g.block, where);
  if (reshaped != g.total) {
    // Built with appends: GCC 12 at -O3 warns falsely (-Wrestrict) on "literal" + string&&.
    const int64_t first = kind == ReorderKind::kTpspLeading ? g.dp : g.tpsp;
    const int64_t second = kind == ReorderKind::kTpspLeading ? g.n : g.dp;
    const int64_t third = kind == ReorderKind::kTpspLeading ? g.tpsp : g.n;
    std::string view = "(";
    view.append(std::to_string(first)).append(", ").append(std::to_string(second));
    view.append(", ").append(std::to_string(third)).append(", ").append(std::to_string(m));
    throw PlanError(where + ": cannot reshape " + std::to_string(g.total) + " elements into " +
                    view + ", ...) = " + std::to_string(reshaped) +
                    " elements (dp_or_fsdp_axis_size()=" + std::to_string(dp_size) +
                    ", tpsp_axis_size()=" + std::to_string(tpsp_size) + ")");
  }
  return g;
}

// Calls f(dst_block, src_block) for every block. A block index (d, i, t) is numbered
// dp-major as (d * n + i) * tpsp + t and tpsp-major as (t * dp + d) * n + i;
// tpsp-leading moves dp-major source blocks to tpsp-major places, dp-leading back.
template <typename F>
void for_each_block(ReorderKind kind, const ReorderGeometry& g, F&& f) {
  for (int64_t d = 0; d < g.dp; ++d) {
    for (int64_t i = 0; i < g.n; ++i) {
      for (int64_t t = 0; t < g.tpsp; ++t) {
        const int64_t dp_major = (d * g.n + i) * g.tpsp + t;
        const int64_t tpsp_major = (t * g.dp + d) * g.n + i;
        if (kind == ReorderKind::kTpspLeading) {
          f(tpsp_major, dp_major);
        } else {
          f(dp_major, tpsp_major);
        }
      }
    }
  }
}

}  // namespace

void check_reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size) {
  geometry(kind, shape, dp_size, tpsp_size);
}

std::vector<int64_t> reorder_permutation(ReorderKind kind, const Shape& shape, int dp_size,
                                         int tpsp_size) {
  const ReorderGeometry g = geometry(kind, shape, dp_size, tpsp_size);
  std::vector<int64_t> perm(static_cast<size_t>(g.total));
  if (g.total == 0) return perm;
  for_each_block(kind, g, [&](int64_t dst, int64_t src) {
    for (int64_t k = 0; k < g.block; ++k) {
      perm[static_cast<size_t>(dst * g.block + k)] = src * g.block + k;
    }
  });
  return perm;
}

void apply_reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size,
                   const void* src, void* dst, size_t element_bytes) {
  const ReorderGeometry g = geometry(kind, shape, dp_size, tpsp_size);
  if (g.total == 0) return;
  if (element_bytes == 0) throw Error(kind_name(kind) + ": element_bytes must be > 0");
  if (src == nullptr || dst == nullptr) {
    throw Error(kind_name(kind) + " of shape " + shape_str(shape) + ": null tensor pointer");
  }
  // Every block index times block is below total (checked in geometry()), so only the byte
  // counts can overflow.
  const size_t block_bytes =
      static_cast<size_t>(checked_bytes(g.block, element_bytes, kind_name(kind) + " block"));
  const size_t bytes =
      static_cast<size_t>(checked_bytes(g.total, element_bytes, kind_name(kind) + " tensor"));
  const auto* s = static_cast<const unsigned char*>(src);
  auto* o = static_cast<unsigned char*>(dst);
  // Compared as integers: relational operators on pointers into different objects are
  // unspecified.
  const auto s_addr = reinterpret_cast<std::uintptr_t>(src);
  const auto o_addr = reinterpret_cast<std::uintptr_t>(dst);
  if (s_addr < o_addr + bytes && o_addr < s_addr + bytes) {
    throw Error(kind_name(kind) + " of shape " + shape_str(shape) +
                ": source and destination buffers overlap");
  }
  for_each_block(kind, g, [&](int64_t dst_block, int64_t src_block) {
    std::memcpy(o + static_cast<size_t>(dst_block) * block_bytes,
                s + static_cast<size_t>(src_block) * block_bytes, block_bytes);
  });
}

}  // namespace cgemm
