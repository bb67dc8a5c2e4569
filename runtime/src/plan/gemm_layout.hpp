#pragma once
// The layouts the runtime runs: a GemmDesc's operands as the one 2-D GEMM of a GemmTask, with
// no copy. gemm.py's lowering views each operand as 2-D, split at its axis boundary
// (get_lhs_axis_boundary / get_rhs_axis_boundary: after the last contracting dim of a
// transposed lhs, before the first of a plain one; before the first contracting dim of a
// transposed rhs, after the last of a plain one), which is the operand as stored only when its
// contracting dims are a consecutive run at one of its ends:
//   lhs [M..., K...] (contracting its trailing dims): [M, K];
//   lhs [K..., M...] (its leading dims, _get_gemm_layout's transposed lhs): [K, M];
//   rhs [K..., N...] (its leading dims): [K, N];
//   rhs [N..., K...] (its trailing dims, the transposed rhs): [N, K];
// M, K and N being the products of those dims (1 for none), contracted in storage order as
// gemm.py's lowering flattens them (gemm_abstract checks only that the two products agree).
// The output is [lhs non-contracting dims..., rhs non-contracting dims...] (gemm.py's abstract),
// i.e. [M, N] row-major.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/core/shape.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"

namespace cgemm {

/// One operand's dims, split as its GEMM reads it.
struct OperandLayout {
  std::vector<int64_t> contracting;  // sanitized (gemm.py's sanitize_dims), as given
  std::vector<int64_t> kept;         // the other dims of range(ndim), increasing
  bool transposed = false;           // gemm.py's _get_gemm_layout
  bool at_one_end = false;           // contracting dims a consecutive run at the start or end

  /// Products of the contracting and of the kept dims of `shape` (1 for none), in checked
  /// 64-bit arithmetic.
  int64_t contracting_size(const Shape& shape) const;
  int64_t kept_size(const Shape& shape) const;
  /// The kept dims of `shape`, in order.
  Shape kept_shape(const Shape& shape) const;
};

/// `dims` of an operand of `ndim` dims; is_lhs picks _get_gemm_layout's rule for the lhs (last
/// dim not contracting) or the rhs (last dim contracting).
OperandLayout operand_layout(size_t ndim, const std::vector<int>& dims, bool is_lhs);

/// Both operands of a GEMM as GemmDesc gives them.
struct GemmLayouts {
  OperandLayout lhs, rhs;
  /// Both operands run as one GemmTask without a copy.
  bool runs_as_one_gemm() const { return lhs.at_one_end && rhs.at_one_end; }
  /// The layout in words for messages: "lhs [4, 8, 16] contracting (0, 1), rhs ...".
  std::string describe(const Shape& lhs_shape, const Shape& rhs_shape) const;
};

GemmLayouts gemm_layouts(size_t lhs_ndim, size_t rhs_ndim, const ContractingDims& dims);

}  // namespace cgemm
