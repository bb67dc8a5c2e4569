#pragma once
// Dimension-number helpers of Transformer Engine's gemm.py, shared by the planner and by
// the layers that lay out the GEMM.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/sharding/gemm_sharding.hpp"

namespace cgemm {

/// gemm.py's sanitize_dims: a negative dim d becomes ndim + d. Like the Python, it does not
/// range-check, so a dim below -ndim stays negative (and later indexes from the end).
std::vector<int64_t> sanitize_dims(int64_t ndim, const std::vector<int>& dims);

/// gemm.py's get_non_contracting_dims: the dims of range(ndim) not among the sanitized
/// contracting dims, in increasing order.
std::vector<int64_t> non_contracting_dims(int64_t ndim, const std::vector<int>& dims);

/// Python's repr of a tuple of dims, as gemm.py's messages print them: "()", "(0,)", "(1, 2)".
std::string dims_str(const std::vector<int64_t>& dims);

/// gemm.py's _get_gemm_layout: lhs is transposed when its last dim is not contracted, rhs
/// when its last dim is.
struct GemmLayout {
  bool lhs_transposed = false;
  bool rhs_transposed = false;
};
GemmLayout gemm_layout(int64_t lhs_ndim, int64_t rhs_ndim, const ContractingDims& dims);

}  // namespace cgemm
