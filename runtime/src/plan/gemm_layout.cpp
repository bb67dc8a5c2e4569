#include "gemm_layout.hpp"

#include <algorithm>

#include "cgemm/sharding/dims.hpp"

namespace cgemm {

namespace {

int64_t product(const Shape& shape, const std::vector<int64_t>& dims, const char* what) {
  int64_t p = 1;
  for (int64_t d : dims) p = checked_mul(p, shape.at(static_cast<size_t>(d)), what);
  return p;
}

}  // namespace

int64_t OperandLayout::contracting_size(const Shape& shape) const {
  return product(shape, contracting, "contracting size");
}

int64_t OperandLayout::kept_size(const Shape& shape) const {
  return product(shape, kept, "non-contracting size");
}

Shape OperandLayout::kept_shape(const Shape& shape) const {
  Shape out;
  for (int64_t d : kept) out.push_back(shape.at(static_cast<size_t>(d)));
  return out;
}

OperandLayout operand_layout(size_t ndim, const std::vector<int>& dims, bool is_lhs) {
  const auto n = static_cast<int64_t>(ndim);
  OperandLayout l;
  l.contracting = sanitize_dims(n, dims);
  l.kept = non_contracting_dims(n, dims);
  const GemmLayout g = is_lhs ? gemm_layout(n, 1, {dims, {0}}) : gemm_layout(1, n, {{0}, dims});
  l.transposed = is_lhs ? g.lhs_transposed : g.rhs_transposed;
  std::vector<int64_t> sorted = l.contracting;
  std::sort(sorted.begin(), sorted.end());
  bool run = !sorted.empty() && sorted.front() >= 0 && sorted.back() < n;
  for (size_t i = 1; run && i < sorted.size(); ++i)
    run = sorted[i] == sorted[0] + static_cast<int64_t>(i);
  l.at_one_end = run && (sorted.front() == 0 || sorted.back() == n - 1);
  return l;
}

GemmLayouts gemm_layouts(size_t lhs_ndim, size_t rhs_ndim, const ContractingDims& dims) {
  return {operand_layout(lhs_ndim, dims.first, true), operand_layout(rhs_ndim, dims.second, false)};
}

std::string GemmLayouts::describe(const Shape& lhs_shape, const Shape& rhs_shape) const {
  return "lhs " + shape_str(lhs_shape) + " contracting " + dims_str(lhs.contracting) + ", rhs " +
         shape_str(rhs_shape) + " contracting " + dims_str(rhs.contracting);
}

}  // namespace cgemm
