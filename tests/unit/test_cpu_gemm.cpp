// The CPU GEMM against a naive fp64 loop on random inputs, every dtype and layout (lhs and rhs
// transposed or not), with strided batch placement, bias, alpha/beta; and the element
// conversions.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/gemm/cpu_gemm.hpp"

namespace cgemm {
namespace {

std::vector<char> random_tensor(DType t, int64_t count, std::mt19937_64& rng,
                                std::vector<double>& exact) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> f(static_cast<size_t>(count));
  for (float& v : f) {
    v = dist(rng);
    if (v == 0.0f) v = 0.5f;  // never zeros
  }
  std::vector<char> bytes(static_cast<size_t>(count) * dtype_size(t));
  convert_from_float(f.data(), bytes.data(), t, count);
  // The exact values are what the stored elements represent after rounding.
  std::vector<float> back(f.size());
  convert_to_float(bytes.data(), t, back.data(), count);
  exact.assign(back.begin(), back.end());
  return bytes;
}

double rtol_for(DType t) {
  return t == DType::kFloat32 ? 1e-5 : t == DType::kBFloat16 ? 1e-2 : 2e-3;
}

// dtype, lhs transposed, rhs transposed, bias, batch, beta
using CpuCase = std::tuple<DType, bool, bool, bool, int64_t, float>;

class CpuGemmTest : public ::testing::TestWithParam<CpuCase> {};

TEST_P(CpuGemmTest, MatchesFp64Reference) {
  const auto [dtype, lhs_t, rhs_t, with_bias, batch, beta] = GetParam();
  std::mt19937_64 rng(::testing::UnitTest::GetInstance()->random_seed() + 17);
  const int64_t m = 37, n = 29, k = 53;
  // Every operand has padded rows and a gap between batch blocks, as the schedule's strided
  // chunks: lhs [m, k] or [k, m], rhs [k, n] or [n, k].
  const int64_t lda = (lhs_t ? m : k) + 2, lhs_stride = ((lhs_t ? k : m) + 1) * lda;
  const int64_t ldb = (rhs_t ? k : n) + 4;
  const int64_t ldc = n + 3, out_stride = (m + 5) * ldc;
  std::vector<double> a, b, bias, c0;
  auto ha = random_tensor(dtype, batch * lhs_stride, rng, a);
  auto hb = random_tensor(dtype, (rhs_t ? n : k) * ldb, rng, b);
  auto hbias = random_tensor(dtype, n, rng, bias);
  // beta == 0: the output starts as NaN, which must not be read. beta != 0: the output region
  // holds random values to accumulate into; the gaps stay NaN.
  auto hc0 = random_tensor(dtype, batch * out_stride, rng, c0);
  std::vector<float> init(static_cast<size_t>(batch * out_stride),
                          std::numeric_limits<float>::quiet_NaN());
  if (beta != 0.0f) {
    for (int64_t bi = 0; bi < batch; ++bi) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const auto o = static_cast<size_t>(bi * out_stride + i * ldc + j);
          init[o] = static_cast<float>(c0[o]);
        }
      }
    }
  }
  std::vector<char> hc(init.size() * dtype_size(dtype));
  convert_from_float(init.data(), hc.data(), dtype, static_cast<int64_t>(init.size()));

  GemmTask t;
  t.m = m;
  t.n = n;
  t.k = k;
  t.in_dtype = t.out_dtype = dtype;
  t.lhs = ha.data();
  t.lda = lda;
  t.lhs_transposed = lhs_t;
  t.rhs = hb.data();
  t.rhs_transposed = rhs_t;
  t.ldb = ldb;
  t.out = hc.data();
  t.ldc = ldc;
  t.bias = with_bias ? hbias.data() : nullptr;
  t.batch = batch;
  t.lhs_batch_stride = lhs_stride;
  t.out_batch_stride = out_stride;
  t.alpha = 1.5f;
  t.beta = beta;
  cpu_gemm(t);

  std::vector<float> c(init.size());
  convert_to_float(hc.data(), dtype, c.data(), static_cast<int64_t>(c.size()));
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          // lhs element (i, p): [m, k] row-major, or [k, m] when transposed; likewise rhs (p, j).
          const double av =
              a[static_cast<size_t>(bi * lhs_stride + (lhs_t ? p * lda + i : i * lda + p))];
          const double bv = b[static_cast<size_t>(rhs_t ? j * ldb + p : p * ldb + j)];
          ref += av * bv;
          mag += std::fabs(av * bv);
        }
        ref *= 1.5;
        mag *= 1.5;
        const auto o = static_cast<size_t>(bi * out_stride + i * ldc + j);
        if (beta != 0.0f) {
          ref += static_cast<double>(beta) * init[o];
          mag += std::fabs(static_cast<double>(beta) * init[o]);
        }
        if (with_bias) {
          ref += bias[static_cast<size_t>(j)];
          mag += std::fabs(bias[static_cast<size_t>(j)]);
        }
        ASSERT_NEAR(c[o], ref, rtol_for(dtype) * mag + 1e-6)
            << "b=" << bi << " i=" << i << " j=" << j;
      }
    }
    // The gap rows and columns between placed blocks stay untouched (still NaN).
    EXPECT_TRUE(std::isnan(c[static_cast<size_t>(bi * out_stride + n)]));
    EXPECT_TRUE(std::isnan(c[static_cast<size_t>(bi * out_stride + m * ldc)]));
  }
}

std::string cpu_case_name(const ::testing::TestParamInfo<CpuCase>& info) {
  const auto [dtype, lhs_t, rhs_t, with_bias, batch, beta] = info.param;
  return std::string(dtype_name(dtype)) + (lhs_t ? "_T" : "_N") + (rhs_t ? "T" : "N") +
         (with_bias ? "_bias" : "_nobias") + "_batch" + std::to_string(batch) +
         (beta != 0.0f ? "_beta" : "_nobeta");
}

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, CpuGemmTest,
    ::testing::Combine(::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values<int64_t>(1, 3), ::testing::Values(0.0f, -0.75f)),
    cpu_case_name);

// The contraction of a transposed lhs is its dim 0: x^T [k, m] times dy [k, n], as a
// weight-gradient GEMM, equals the same GEMM on the explicitly transposed copy of x.
TEST(CpuGemm, TransposedLhsEqualsAnExplicitTranspose) {
  std::mt19937_64 rng(5);
  const int64_t m = 6, n = 5, k = 9;
  std::vector<double> x, dy;
  auto hx = random_tensor(DType::kFloat32, k * m, rng, x);    // [k, m]
  auto hdy = random_tensor(DType::kFloat32, k * n, rng, dy);  // [k, n]
  std::vector<float> xt(static_cast<size_t>(m * k));
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t i = 0; i < m; ++i) {
      xt[static_cast<size_t>(i * k + p)] = static_cast<float>(x[static_cast<size_t>(p * m + i)]);
    }
  }
  std::vector<float> got(static_cast<size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> want(got.size(), std::numeric_limits<float>::quiet_NaN());
  GemmTask t;
  t.m = m;
  t.n = n;
  t.k = k;
  t.in_dtype = t.out_dtype = DType::kFloat32;
  t.rhs = hdy.data();
  t.ldb = n;
  t.ldc = n;
  t.lhs = hx.data();
  t.lda = m;
  t.lhs_transposed = true;
  t.out = got.data();
  cpu_gemm(t);
  t.lhs = xt.data();
  t.lda = k;
  t.lhs_transposed = false;
  t.out = want.data();
  cpu_gemm(t);
  EXPECT_EQ(got, want);
}

TEST(CpuGemm, RejectsInconsistentStrides) {
  GemmTask t;
  t.m = 4;
  t.n = 4;
  t.k = 4;
  t.lda = 2;  // < k
  t.ldb = 4;
  t.ldc = 4;
  EXPECT_THROW(cpu_gemm(t), Error);
  t.m = 8;
  t.lda = 4;  // >= k but < m, the row length of a transposed lhs [k, m]
  t.lhs_transposed = true;
  EXPECT_THROW(cpu_gemm(t), Error);
}

TEST(Numeric, Bf16AndFp16RoundTripAndRounding) {
  using namespace numeric;
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(-2.5f)), -2.5f);
  // Round to nearest even at the halfway point.
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80u);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82u);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(fp16_to_float(float_to_fp16(70000.0f))));
  EXPECT_EQ(fp16_to_float(float_to_fp16(65504.0f)), 65504.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(5.9604644775390625e-8f)), 5.9604644775390625e-8f);
  // Every finite half converts to float and back unchanged.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    if ((h & 0x7c00u) == 0x7c00u) continue;
    ASSERT_EQ(float_to_fp16(fp16_to_float(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(Numeric, NormalValuesHaveTheRequestedSpread) {
  double sum = 0.0, sq = 0.0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double v = numeric::normal_value(42, static_cast<uint64_t>(i), 0.023f);
    sum += v;
    sq += v * v;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.001);
  EXPECT_NEAR(std::sqrt(sq / n), 0.023, 0.0005);
  EXPECT_NE(numeric::normal_value(1, 5, 1.0f), numeric::normal_value(2, 5, 1.0f));
}

}  // namespace
}  // namespace cgemm
