#pragma once
// The tensor/sequence reorders of Transformer Engine's gemm.py:
//  - tpsp-leading (_reorder_tpsp_leading): reshape (dp, n, tpsp, m, ...), transpose
//    (2, 0, 1, 3, ...). Applied to lhs [B, S, K] before a reduce-scatter GEMM so the rows
//    destined for each tpsp rank are contiguous.
//  - dp-leading (_reorder_dp_leading): reshape (tpsp, dp, n, m, ...), transpose
//    (1, 2, 0, 3, ...). Applied to the all-gather GEMM's output, whose chunks arrive
//    rank-major, to bring it back to [B, S, N].
// Here n = shape[0] / dp and m = shape[1] / tpsp; dp is dp_or_fsdp_axis_size().

#include <cstdint>
#include <vector>

#include "cgemm/core/error.hpp"
#include "cgemm/core/shape.hpp"

namespace cgemm {

enum class ReorderKind { kTpspLeading, kDpLeading };

/// Checks the two divisibility assertions and the reshape's element count, as gemm.py does.
/// Throws PlanError naming the shape and the sizes.
void check_reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size);

/// permutation[i] = the flat source index of output element i (row-major). Empty for a
/// zero-size shape. Throws as check_reorder.
std::vector<int64_t> reorder_permutation(ReorderKind kind, const Shape& shape, int dp_size,
                                         int tpsp_size);

/// Applies the reorder to a row-major tensor of `shape` whose elements are
/// `element_bytes` wide, moving whole trailing rows (dims 2.. contiguous) at a time.
/// `dst` and `src` must not overlap. Throws as check_reorder.
void apply_reorder(ReorderKind kind, const Shape& shape, int dp_size, int tpsp_size,
                   const void* src, void* dst, size_t element_bytes);

}  // namespace cgemm
