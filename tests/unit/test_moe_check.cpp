// The MoE experiment's check (launcher/run/moe_check.hpp): a grouped GEMM's output rounded from
// the fp64 reference passes in every dtype, with empty groups and one group holding every
// row; a deliberately broken output fails (one element off by more than its bound, a NaN left
// from the poison, a group given another group's weights), naming the group, row and column;
// the row choice of rows_per_group; lengths that do not match the shapes are refused.
// (The experiment itself has no fault hook for wrong results: this is where a broken run is
// shown to fail.)

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "run/moe_check.hpp"

namespace cgemm::launcher {
namespace {

// Fresh random values in +-[0.25, 1], rounded to `dtype`.
std::vector<float> random_values(int64_t count, DType dtype, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> f(static_cast<size_t>(count));
  for (float& x : f) x = sign(gen) ? mag(gen) : -mag(gen);
  std::vector<char> buf(f.size() * dtype_size(dtype) + 1);
  convert_from_float(f.data(), buf.data(), dtype, count);
  convert_to_float(buf.data(), dtype, f.data(), count);
  return f;
}

struct Case {
  std::vector<int32_t> sizes;
  int64_t k = 40, n = 24;
  DType dtype = DType::kBFloat16;
  std::vector<float> lhs, rhs, out;
  int64_t m() const {
    int64_t s = 0;
    for (int32_t v : sizes) s += v;
    return s;
  }
  // out = the fp64 reference rounded to dtype once (what the CPU backend writes).
  Case(std::vector<int32_t> sz, DType t, uint32_t seed) : sizes(std::move(sz)), dtype(t) {
    const auto g = static_cast<int64_t>(sizes.size());
    lhs = random_values(m() * k, dtype, seed);
    rhs = random_values(g * k * n, dtype, seed + 1);
    std::vector<float> ref(static_cast<size_t>(m() * n));
    int64_t off = 0;
    for (int64_t gi = 0; gi < g; ++gi) {
      for (int64_t i = off; i < off + sizes[static_cast<size_t>(gi)]; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double r = 0.0;
          for (int64_t p = 0; p < k; ++p) {
            r += static_cast<double>(lhs[static_cast<size_t>(i * k + p)]) *
                 rhs[static_cast<size_t>((gi * k + p) * n + j)];
          }
          ref[static_cast<size_t>(i * n + j)] = static_cast<float>(r);
        }
      }
      off += sizes[static_cast<size_t>(gi)];
    }
    std::vector<char> buf(ref.size() * dtype_size(dtype) + 1);
    convert_from_float(ref.data(), buf.data(), dtype, m() * n);
    out.resize(ref.size());
    convert_to_float(buf.data(), dtype, out.data(), m() * n);
  }
  GroupedRowsCheck check(int64_t rows_per_group = 0) const {
    return check_ragged_rows(lhs, rhs, out, sizes, k, n, rows_per_group, output_eps(dtype),
                             accumulation_eps(false), output_tiny(dtype));
  }
};

TEST(MoeCheck, RoundedReferencePassesInEveryDtype) {
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (const auto& sizes : std::vector<std::vector<int32_t>>{
             {24, 24, 24, 24}, {61, 3, 0, 28}, {0, 0, 96, 0}, {96}, {0, 1, 0, 0, 5, 0, 90, 0}}) {
      const Case c(sizes, t, 11);
      const GroupedRowsCheck r = c.check();
      EXPECT_EQ(r.failures, 0) << dtype_name(t) << ": " << r.first_failure;
      EXPECT_EQ(r.compared, c.m() * c.n);
      EXPECT_EQ(r.rows, c.m());
      EXPECT_LE(r.max_ratio, 1.0);
    }
  }
}

TEST(MoeCheck, AnElementBeyondItsBoundFailsNamingIt) {
  Case c({61, 3, 0, 28}, DType::kBFloat16, 5);
  // Group 1's row 2 is row 63 of the output.
  float& v = c.out[static_cast<size_t>(63 * c.n + 7)];
  v = v * (1.0f + 0.03f);  // 3%: beyond bf16's 2^-7
  const GroupedRowsCheck r = c.check();
  EXPECT_EQ(r.failures, 1);
  EXPECT_NE(r.first_failure.find("group 1 row 2 col 7"), std::string::npos) << r.first_failure;
  EXPECT_GT(r.max_ratio, 1.0);
}

TEST(MoeCheck, PoisonLeftInTheOutputFails) {
  Case c({10, 0, 20}, DType::kFloat16, 6);
  c.out.back() = std::numeric_limits<float>::quiet_NaN();
  const GroupedRowsCheck r = c.check();
  EXPECT_EQ(r.failures, 1);
  EXPECT_NE(r.first_failure.find("group 2 row 19 col 23"), std::string::npos) << r.first_failure;
}

TEST(MoeCheck, AnotherGroupsWeightsFail) {
  // The output of a grouped GEMM that read w[0] for every group: groups 1 and 2 fail.
  const Case c({8, 8, 8}, DType::kFloat32, 7);
  std::vector<float> out = c.out;
  for (int64_t i = 8; i < 24; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double r = 0.0;
      for (int64_t p = 0; p < c.k; ++p) {
        r += static_cast<double>(c.lhs[static_cast<size_t>(i * c.k + p)]) *
             c.rhs[static_cast<size_t>(p * c.n + j)];
      }
      out[static_cast<size_t>(i * c.n + j)] = static_cast<float>(r);
    }
  }
  const GroupedRowsCheck r =
      check_ragged_rows(c.lhs, c.rhs, out, c.sizes, c.k, c.n, 0, output_eps(c.dtype),
                        accumulation_eps(false), output_tiny(c.dtype));
  EXPECT_EQ(r.failures, 16 * c.n);
  EXPECT_NE(r.first_failure.find("group 1 row 0"), std::string::npos) << r.first_failure;
}

TEST(MoeCheck, RowsPerGroupChecksFirstLastAndBetween) {
  Case c({10, 0, 1, 7}, DType::kBFloat16, 8);
  // R = 3: rows 0, 4, 9 of group 0; row 0 of group 2; rows 0, 3, 6 of group 3.
  GroupedRowsCheck r = c.check(3);
  EXPECT_EQ(r.rows, 3 + 1 + 3);
  EXPECT_EQ(r.compared, 7 * c.n);
  EXPECT_EQ(r.failures, 0);
  // A broken row that is not sampled passes with R = 3 and fails with every row checked.
  c.out[static_cast<size_t>(2 * c.n)] = 100.0f;  // group 0, row 2
  EXPECT_EQ(c.check(3).failures, 0);
  EXPECT_EQ(c.check(0).failures, 1);
  c.out[static_cast<size_t>(9 * c.n + 3)] = 100.0f;  // group 0, row 9: the last, sampled
  EXPECT_EQ(c.check(3).failures, 1);
}

TEST(MoeCheck, BoundsPerDtype) {
  EXPECT_EQ(output_eps(DType::kBFloat16), std::ldexp(1.0, -7));
  EXPECT_EQ(output_eps(DType::kFloat16), std::ldexp(1.0, -10));
  EXPECT_EQ(output_eps(DType::kFloat32), std::ldexp(1.0, -21));
  EXPECT_EQ(output_tiny(DType::kFloat16), std::ldexp(1.0, -24));
  EXPECT_EQ(accumulation_eps(true), std::ldexp(1.0, -23));
  EXPECT_THROW(output_eps(DType::kFloat8E4M3), Error);
}

TEST(MoeCheck, MismatchedLengthsAreRefused) {
  const Case c({4, 4}, DType::kBFloat16, 9);
  const std::vector<float> short_out(c.out.begin(), c.out.end() - 1);
  EXPECT_THROW(check_ragged_rows(c.lhs, c.rhs, short_out, c.sizes, c.k, c.n, 0, 0.01, 0.0, 0.0),
               Error);
}

}  // namespace
}  // namespace cgemm::launcher
