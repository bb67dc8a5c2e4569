// The CPU GEMM against a naive fp64 loop on random inputs, every dtype and layout, with
// strided batch placement, bias, alpha/beta; and the element conversions.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
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

class CpuGemmTest : public ::testing::TestWithParam<std::tuple<DType, bool, bool, int64_t>> {};

TEST_P(CpuGemmTest, MatchesFp64Reference) {
  const auto [dtype, rhs_t, with_bias, batch] = GetParam();
  std::mt19937_64 rng(::testing::UnitTest::GetInstance()->random_seed() + 17);
  const int64_t m = 37, n = 29, k = 53;
  // Output rows of each batch block are placed with a gap, as the schedule's strided chunks.
  const int64_t ldc = n + 3, out_stride = (m + 5) * ldc, lda = k, lhs_stride = m * lda;
  std::vector<double> a, b, bias;
  auto ha = random_tensor(dtype, batch * lhs_stride, rng, a);
  auto hb = random_tensor(dtype, k * n, rng, b);
  auto hbias = random_tensor(dtype, n, rng, bias);
  std::vector<float> nan(static_cast<size_t>(batch * out_stride),
                         std::numeric_limits<float>::quiet_NaN());
  std::vector<char> hc(nan.size() * dtype_size(dtype));
  convert_from_float(nan.data(), hc.data(), dtype, static_cast<int64_t>(nan.size()));

  GemmTask t;
  t.m = m;
  t.n = n;
  t.k = k;
  t.in_dtype = t.out_dtype = dtype;
  t.lhs = ha.data();
  t.lda = lda;
  t.rhs = hb.data();
  t.rhs_transposed = rhs_t;
  t.ldb = rhs_t ? k : n;
  t.out = hc.data();
  t.ldc = ldc;
  t.bias = with_bias ? hbias.data() : nullptr;
  t.batch = batch;
  t.lhs_batch_stride = lhs_stride;
  t.out_batch_stride = out_stride;
  t.alpha = 1.5f;
  cpu_gemm(t);

  std::vector<float> c(nan.size());
  convert_to_float(hc.data(), dtype, c.data(), static_cast<int64_t>(c.size()));
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          // rhs element (p, j): [k, n] row-major, or [n, k] when transposed.
          const double bv =
              rhs_t ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)];
          const double av = a[static_cast<size_t>(bi * lhs_stride + i * lda + p)];
          ref += av * bv;
          mag += std::fabs(av * bv);
        }
        ref *= 1.5;
        mag *= 1.5;
        if (with_bias) {
          ref += bias[static_cast<size_t>(j)];
          mag += std::fabs(bias[static_cast<size_t>(j)]);
        }
        const double got = c[static_cast<size_t>(bi * out_stride + i * ldc + j)];
        ASSERT_NEAR(got, ref, rtol_for(dtype) * mag + 1e-6)
            << "b=" << bi << " i=" << i << " j=" << j;
      }
    }
    // The gap rows and columns between placed blocks stay untouched (still NaN).
    EXPECT_TRUE(std::isnan(c[static_cast<size_t>(bi * out_stride + n)]));
    EXPECT_TRUE(std::isnan(c[static_cast<size_t>(bi * out_stride + m * ldc)]));
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, CpuGemmTest,
    ::testing::Combine(::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Values<int64_t>(1, 3)));

TEST(CpuGemm, RejectsInconsistentStrides) {
  GemmTask t;
  t.m = 4;
  t.n = 4;
  t.k = 4;
  t.lda = 2;  // < k
  t.ldb = 4;
  t.ldc = 4;
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
