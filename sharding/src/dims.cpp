#include "cgemm/sharding/dims.hpp"

#include <algorithm>

namespace cgemm {

std::vector<int64_t> sanitize_dims(int64_t ndim, const std::vector<int>& dims) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (int d : dims) out.push_back(d < 0 ? ndim + d : d);
  return out;
}

std::vector<int64_t> non_contracting_dims(int64_t ndim, const std::vector<int>& dims) {
  const auto cdims = sanitize_dims(ndim, dims);
  std::vector<int64_t> out;
  for (int64_t d = 0; d < ndim; ++d) {
    if (std::find(cdims.begin(), cdims.end(), d) == cdims.end()) out.push_back(d);
  }
  return out;
}

GemmLayout gemm_layout(int64_t lhs_ndim, int64_t rhs_ndim, const ContractingDims& dims) {
  const auto lhs = sanitize_dims(lhs_ndim, dims.first);
  const auto rhs = sanitize_dims(rhs_ndim, dims.second);
  GemmLayout layout;
  layout.lhs_transposed = std::find(lhs.begin(), lhs.end(), lhs_ndim - 1) == lhs.end();
  layout.rhs_transposed = std::find(rhs.begin(), rhs.end(), rhs_ndim - 1) != rhs.end();
  return layout;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string out = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(dims[i]);
  }
  if (dims.size() == 1) out += ",";
  return out + ")";
}

}  // namespace cgemm
