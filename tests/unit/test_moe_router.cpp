// cgemm-run's MoE router (launcher/common/moe_router.hpp): every rule's sizes sum to the tokens,
// the empty groups are the stated number, uniform is an even split, skewed follows the Zipf weights
// within one token, one_group puts everything in one group, the draw is fixed for a seed (a pinned
// case) and changes with it, and bad arguments are refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

#include "cgemm/core/error.hpp"
#include "common/moe_router.hpp"

namespace cgemm::launcher {
namespace {

int64_t sum(const std::vector<int32_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}
int64_t empties(const std::vector<int32_t>& v) { return std::count(v.begin(), v.end(), 0); }

TEST(MoeRouter, Names) {
  for (MoeRouter r : {MoeRouter::kUniform, MoeRouter::kSkewed, MoeRouter::kOneGroup}) {
    EXPECT_EQ(parse_moe_router(moe_router_name(r)), r);
  }
  try {
    parse_moe_router("zipf");
    FAIL() << "zipf parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'zipf'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("uniform, skewed or one_group"), std::string::npos);
  }
}

TEST(MoeRouter, UniformIsAnEvenSplitOverTheActiveGroups) {
  for (int64_t e : {0, 1, 5}) {
    const auto s = route_tokens(MoeRouter::kUniform, 1000, 8, e, 7);
    ASSERT_EQ(s.size(), 8u);
    EXPECT_EQ(sum(s), 1000);
    EXPECT_EQ(empties(s), e);
    const int64_t a = 8 - e;
    int64_t extra = 0;
    for (int32_t v : s) {
      if (v == 0) continue;
      EXPECT_TRUE(v == 1000 / a || v == 1000 / a + 1) << v;
      extra += v - 1000 / a;
    }
    EXPECT_EQ(extra, 1000 % a);
  }
  // Equal sizes when the active groups divide the tokens (the seed does not matter).
  EXPECT_EQ(route_tokens(MoeRouter::kUniform, 64, 4, 0, 1), (std::vector<int32_t>{16, 16, 16, 16}));
  EXPECT_EQ(route_tokens(MoeRouter::kUniform, 64, 4, 0, 99),
            (std::vector<int32_t>{16, 16, 16, 16}));
}

TEST(MoeRouter, SkewedFollowsTheZipfWeightsWithinOneToken) {
  for (int64_t e : {0, 8}) {
    const int64_t t = 65536, g = 64, a = g - e;
    auto s = route_tokens(MoeRouter::kSkewed, t, g, e, 1234);
    EXPECT_EQ(sum(s), t);
    EXPECT_EQ(empties(s), e);
    std::sort(s.begin(), s.end(), std::greater<>());
    double total = 0.0;
    for (int64_t r = 1; r <= a; ++r) total += std::pow(static_cast<double>(r), -kMoeSkewExponent);
    for (int64_t r = 0; r < a; ++r) {
      const double quota =
          static_cast<double>(t) * std::pow(static_cast<double>(r + 1), -1.2) / total;
      EXPECT_LT(std::fabs(s[static_cast<size_t>(r)] - quota), 1.0) << "rank " << r;
    }
  }
  // Few tokens: the tail of the weights gets none, and the sum still holds.
  const auto s = route_tokens(MoeRouter::kSkewed, 10, 64, 0, 3);
  EXPECT_EQ(sum(s), 10);
  EXPECT_GT(empties(s), 50);
}

TEST(MoeRouter, OneGroupHoldsEveryToken) {
  const auto s = route_tokens(MoeRouter::kOneGroup, 4096, 16, 0, 5);
  EXPECT_EQ(sum(s), 4096);
  EXPECT_EQ(empties(s), 15);
  EXPECT_EQ(*std::max_element(s.begin(), s.end()), 4096);
}

TEST(MoeRouter, FixedForASeedAndChangingWithIt) {
  // Pinned: the rules are the same on every platform (moe_router.hpp); a change to them shows
  // here. (configs/moe_demo.ini's sizes.)
  EXPECT_EQ(
      route_tokens(MoeRouter::kSkewed, 2048, 16, 2, 1234),
      (std::vector<int32_t>{32, 206, 146, 35, 769, 49, 63, 74, 39, 112, 0, 43, 55, 90, 0, 335}));
  EXPECT_EQ(route_tokens(MoeRouter::kSkewed, 2048, 16, 2, 1234),
            route_tokens(MoeRouter::kSkewed, 2048, 16, 2, 1234));
  EXPECT_NE(route_tokens(MoeRouter::kSkewed, 2048, 16, 2, 1234),
            route_tokens(MoeRouter::kSkewed, 2048, 16, 2, 1235));
  EXPECT_NE(route_tokens(MoeRouter::kUniform, 2048, 16, 4, 1),
            route_tokens(MoeRouter::kUniform, 2048, 16, 4, 2));  // other groups emptied
}

TEST(MoeRouter, EdgeSizes) {
  EXPECT_EQ(route_tokens(MoeRouter::kSkewed, 5, 1, 0, 1), (std::vector<int32_t>{5}));
  EXPECT_EQ(route_tokens(MoeRouter::kUniform, 0, 3, 0, 1), (std::vector<int32_t>{0, 0, 0}));
  const auto s = route_tokens(MoeRouter::kUniform, 3, 16, 0, 1);
  EXPECT_EQ(sum(s), 3);
  EXPECT_EQ(empties(s), 13);
}

TEST(MoeRouter, BadArgumentsAreRefused) {
  EXPECT_THROW(route_tokens(MoeRouter::kUniform, -1, 4, 0, 1), Error);
  EXPECT_THROW(route_tokens(MoeRouter::kUniform, int64_t{1} << 31, 4, 0, 1), Error);
  EXPECT_THROW(route_tokens(MoeRouter::kUniform, 8, 0, 0, 1), Error);
  EXPECT_THROW(route_tokens(MoeRouter::kUniform, 8, 4, 4, 1), Error);
  EXPECT_THROW(route_tokens(MoeRouter::kUniform, 8, 4, -1, 1), Error);
  EXPECT_THROW(route_tokens(MoeRouter::kOneGroup, 8, 4, 1, 1), Error);
}

}  // namespace
}  // namespace cgemm::launcher
