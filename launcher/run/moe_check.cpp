// The fp64 per-group reference check of a ragged-rows grouped GEMM (moe_check.hpp).

#include "moe_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "cgemm/core/error.hpp"

namespace cgemm::launcher {

void GroupedRowsCheck::merge(const GroupedRowsCheck& o) {
  compared += o.compared;
  failures += o.failures;
  rows += o.rows;
  max_abs = std::max(max_abs, o.max_abs);
  max_ratio = std::max(max_ratio, o.max_ratio);
  if (first_failure.empty()) first_failure = o.first_failure;
}

double output_eps(DType out) {
  switch (out) {
    case DType::kBFloat16:
      return std::ldexp(1.0, -7);
    case DType::kFloat16:
      return std::ldexp(1.0, -10);
    case DType::kFloat32:
      return std::ldexp(1.0, -21);
    default:
      throw Error("the MoE check has no bound for output dtype " + std::string(dtype_name(out)));
  }
}

double output_tiny(DType out) {
  switch (out) {
    case DType::kBFloat16:
      return std::ldexp(1.0, -133);
    case DType::kFloat16:
      return std::ldexp(1.0, -24);
    case DType::kFloat32:
      return std::ldexp(1.0, -149);
    default:
      throw Error("the MoE check has no bound for output dtype " + std::string(dtype_name(out)));
  }
}

double accumulation_eps(bool fp32_accumulation) {
  return std::ldexp(1.0, fp32_accumulation ? -23 : -50);
}

GroupedRowsCheck check_ragged_rows(std::span<const float> lhs, std::span<const float> rhs,
                                   std::span<const float> out, std::span<const int32_t> sizes,
                                   int64_t k, int64_t n, int64_t rows_per_group, double eps,
                                   double acc, double tiny) {
  int64_t m = 0;
  for (int32_t s : sizes) m += s;
  const auto g = static_cast<int64_t>(sizes.size());
  if (static_cast<int64_t>(lhs.size()) != m * k || static_cast<int64_t>(rhs.size()) != g * k * n ||
      static_cast<int64_t>(out.size()) != m * n) {
    throw Error(
        "check_ragged_rows: lhs, rhs or out does not hold [M, K], [G, K, N], [M, N] values");
  }
  GroupedRowsCheck c;
  std::vector<double> r(static_cast<size_t>(n)), mag(static_cast<size_t>(n));
  int64_t off = 0;
  for (int64_t gi = 0; gi < g; ++gi) {
    const int64_t size = sizes[static_cast<size_t>(gi)];
    const int64_t count = rows_per_group > 0 ? std::min(rows_per_group, size) : size;
    for (int64_t t = 0; t < count; ++t) {
      // All rows, or first, last and evenly spaced between.
      const int64_t row = count == size ? t : count == 1 ? 0 : t * (size - 1) / (count - 1);
      const int64_t i = off + row;
      std::fill(r.begin(), r.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      for (int64_t p = 0; p < k; ++p) {
        const double a = lhs[static_cast<size_t>(i * k + p)];
        const float* b = rhs.data() + (gi * k + p) * n;
        for (int64_t j = 0; j < n; ++j) {
          const double ab = a * static_cast<double>(b[j]);
          r[static_cast<size_t>(j)] += ab;
          mag[static_cast<size_t>(j)] += std::fabs(ab);
        }
      }
      ++c.rows;
      for (int64_t j = 0; j < n; ++j) {
        const double ref = r[static_cast<size_t>(j)];
        const double got = out[static_cast<size_t>(i * n + j)];
        const double bound = eps * std::fabs(ref) +
                             acc * static_cast<double>(k) * mag[static_cast<size_t>(j)] + tiny;
        const double err = std::fabs(got - ref);
        ++c.compared;
        if (std::isfinite(got)) {
          c.max_abs = std::max(c.max_abs, err);
          c.max_ratio = std::max(c.max_ratio, err / bound);
        }
        if (!(err <= bound)) {  // NaN fails
          if (++c.failures == 1) {
            char line[200];
            std::snprintf(line, sizeof(line),
                          "group %lld row %lld col %lld: got %.9g, reference %.9g, bound %.3g",
                          static_cast<long long>(gi), static_cast<long long>(row),
                          static_cast<long long>(j), got, ref, bound);
            c.first_failure = line;
          }
        }
      }
    }
    off += size;
  }
  return c;
}

}  // namespace cgemm::launcher
