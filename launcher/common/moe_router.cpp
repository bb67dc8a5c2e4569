// The MoE router's rules (moe_router.hpp).

#include "moe_router.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "cgemm/core/error.hpp"

namespace cgemm::launcher {

namespace {

// splitmix64 (Steele, Lea, Flood 2014): a fixed stream for a seed on every platform.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // An index in [0, n): the top 53 bits as a fraction of n (bias below 2^-53 n, none that
  // matters for choosing groups).
  int64_t below(int64_t n) {
    const double u = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return std::min<int64_t>(static_cast<int64_t>(u * static_cast<double>(n)), n - 1);
  }
};

// A seeded permutation of 0..n-1 (Fisher-Yates).
std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), int64_t{0});
  // Mixed with a constant so the router's stream is not the inputs' (which also start from
  // the seed).
  SplitMix64 rng{seed ^ 0x6d6f655f726f7574ull};
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(rng.below(i + 1))]);
  return p;
}

}  // namespace

const char* moe_router_name(MoeRouter r) {
  switch (r) {
    case MoeRouter::kUniform:
      return "uniform";
    case MoeRouter::kSkewed:
      return "skewed";
    case MoeRouter::kOneGroup:
      return "one_group";
  }
  return "?";
}

MoeRouter parse_moe_router(const std::string& text) {
  for (MoeRouter r : {MoeRouter::kUniform, MoeRouter::kSkewed, MoeRouter::kOneGroup}) {
    if (text == moe_router_name(r)) return r;
  }
  throw Error("unknown router '" + text + "' (uniform, skewed or one_group)");
}

std::vector<int32_t> route_tokens(MoeRouter router, int64_t tokens, int64_t experts,
                                  int64_t empty_groups, uint64_t seed) {
  if (tokens < 0 || tokens > std::numeric_limits<int32_t>::max()) {
    throw Error("tokens " + std::to_string(tokens) + ": must be 0 to 2^31 - 1 (int32 group sizes)");
  }
  if (experts < 1) throw Error("experts " + std::to_string(experts) + ": must be at least 1");
  if (empty_groups < 0 || empty_groups >= experts) {
    throw Error("empty groups " + std::to_string(empty_groups) +
                ": must be 0 to experts - 1 = " + std::to_string(experts - 1));
  }
  if (router == MoeRouter::kOneGroup && empty_groups != 0) {
    throw Error("empty groups " + std::to_string(empty_groups) +
                ": the one_group router already leaves every group but one empty (give 0)");
  }
  const std::vector<int64_t> perm = permutation(experts, seed);
  std::vector<int32_t> sizes(static_cast<size_t>(experts), 0);
  const auto at = [&](int64_t g) -> int32_t& { return sizes[static_cast<size_t>(g)]; };
  if (router == MoeRouter::kOneGroup) {
    at(perm[0]) = static_cast<int32_t>(tokens);
    return sizes;
  }
  std::vector<int64_t> active(perm.begin() + empty_groups, perm.end());
  const auto a = static_cast<int64_t>(active.size());
  if (router == MoeRouter::kUniform) {
    std::sort(active.begin(), active.end());
    for (int64_t i = 0; i < a; ++i) {
      at(active[static_cast<size_t>(i)]) =
          static_cast<int32_t>(tokens / a + (i < tokens % a ? 1 : 0));
    }
    return sizes;
  }
  // skewed: largest remainder over the Zipf weights, in rank order.
  std::vector<double> w(static_cast<size_t>(a));
  for (int64_t r = 0; r < a; ++r)
    w[static_cast<size_t>(r)] = std::pow(static_cast<double>(r + 1), -kMoeSkewExponent);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<double> frac(static_cast<size_t>(a));
  int64_t given = 0;
  for (int64_t r = 0; r < a; ++r) {
    const double quota = static_cast<double>(tokens) * w[static_cast<size_t>(r)] / total;
    const auto whole = std::min<int64_t>(static_cast<int64_t>(std::floor(quota)), tokens - given);
    at(active[static_cast<size_t>(r)]) = static_cast<int32_t>(whole);
    frac[static_cast<size_t>(r)] = quota - static_cast<double>(whole);
    given += whole;
  }
  std::vector<int64_t> order(static_cast<size_t>(a));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return frac[static_cast<size_t>(x)] > frac[static_cast<size_t>(y)];
  });
  // Fewer than A tokens are left over (each floor drops less than one).
  for (int64_t i = 0; given < tokens; ++i, ++given)
    ++at(active[static_cast<size_t>(order[static_cast<size_t>(i % a)])]);
  return sizes;
}

}  // namespace cgemm::launcher
