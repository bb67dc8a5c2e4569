// The grouped GEMM studies' shared pieces (moe_cases.hpp).

#include "moe_cases.hpp"

#include <algorithm>
#include <cmath>

#include "cgemm/core/convert.hpp"

namespace cgemm::launcher::parts {

namespace {

std::vector<float> row_values(Backend& be, const void* out, int64_t row, int64_t n) {
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  be.copy_to_host(bits.data(), static_cast<const char*>(out) + row * n * 2,
                  bits.size() * sizeof(uint16_t));
  std::vector<float> v(bits.size());
  convert_to_float(bits.data(), DType::kBFloat16, v.data(), n);
  return v;
}

}  // namespace

const std::vector<MoeCase>& moe_cases() {
  static const std::vector<MoeCase> cases{{32768, 8, 4096, 14336, GroupSkew::kUniform},
                                          {65536, 64, 4096, 2048, GroupSkew::kUniform},
                                          {65536, 64, 4096, 2048, GroupSkew::kSkewed},
                                          {16384, 64, 2048, 1408, GroupSkew::kUniform},
                                          {16384, 64, 2048, 1408, GroupSkew::kSkewed}};
  return cases;
}

MoeCase divided(const MoeCase& full, int64_t div, int64_t multiple) {
  MoeCase c = full;
  c.tokens = std::max<int64_t>(full.tokens / div, c.groups);
  c.k = std::max<int64_t>(full.k / div / multiple * multiple, multiple);
  c.n = std::max<int64_t>(full.n / div / multiple * multiple, multiple);
  return c;
}

std::string moe_name(const MoeCase& c) {
  return std::to_string(c.tokens) + "x" + std::to_string(c.groups) + "x" + std::to_string(c.k) +
         "x" + std::to_string(c.n);
}

GroupedGemmDesc moe_desc(const MoeCase& c) {
  GroupedGemmDesc d;
  d.name = "moe " + moe_name(c);
  d.form = GroupedForm::kRaggedRows;
  d.num_groups = c.groups;
  d.lhs_shape = {c.tokens, c.k};
  d.lhs_contracting_dims = {1};
  d.rhs_shape = {c.groups, c.n, c.k};
  d.rhs_contracting_dims = {2};
  d.dtype = DType::kBFloat16;
  return d;
}

std::string path_text(const GroupedGemmPlan& p) {
  return std::string(grouped_path_name(p.path())) +
         (p.loop_fallbacks() > 0 ? " (fell back to the loop)" : "");
}

BackendBuffers::~BackendBuffers() {
  for (void* p : held_) be_.release(p);
}

void* BackendBuffers::get(size_t bytes) {
  held_.push_back(be_.allocate(bytes));
  return held_.back();
}

double rel_diff(Backend& be, const void* a_out, const void* b_out,
                const std::vector<int32_t>& sizes, int64_t n) {
  double diff = 0.0, mag = 0.0;
  int64_t off = 0;
  for (int32_t size : sizes) {
    for (int64_t row : {off, off + size - 1}) {
      if (size == 0) break;
      const std::vector<float> a = row_values(be, a_out, row, n);
      const std::vector<float> b = row_values(be, b_out, row, n);
      for (size_t j = 0; j < a.size(); ++j) {
        diff = std::max(diff, static_cast<double>(std::fabs(a[j] - b[j])));
        mag = std::max(mag, static_cast<double>(std::fabs(a[j])));
        if (std::isnan(a[j]) || std::isnan(b[j])) diff = std::nan("");
      }
    }
    off += size;
  }
  return mag > 0 ? diff / mag : diff;
}

}  // namespace cgemm::launcher::parts
