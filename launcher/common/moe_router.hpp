#pragma once
// cgemm-run's MoE experiment (moe_block.hpp): the router that draws the G group sizes (tokens
// per expert) from the seed. Tokens are already sorted by expert: group g owns the rows
// [off_g, off_g + size_g) of x, in group order, as a grouped GEMM's ragged rows are laid out
// (cgemm/runtime/grouped_plan.hpp).
//
// The rules, each a pure function of (router, tokens T, experts G, empty groups E, seed), the
// same on every platform (a splitmix64 stream and a Fisher-Yates shuffle of our own, not the
// standard library's unspecified distributions):
//  - A seeded permutation P of 0..G-1 orders the groups; P[0..E) get no tokens, and the rest,
//    A = G - E groups, are the active ones (E = moe_empty_groups, 0 <= E < G).
//  - uniform: the T tokens split evenly over the active groups: each gets floor(T / A), and
//    the first T mod A of them (in group index order) one more. Equal sizes when A divides T.
//  - skewed: a Zipf-like split: the active group P[E + r] (r = 0, 1, ...) weighs
//    1 / (r + 1)^1.2; each gets floor(T x its share) tokens and the leftover tokens go one
//    each to the largest remainders (ties: lower r). The largest group takes about 28% of T
//    at G = 64; small T can leave further groups empty.
//  - one_group: every token in group P[0] (E must be 0: the others are all empty).
// Sizes are int32 (a grouped GEMM's sizes), T <= 2^31 - 1.

#include <cstdint>
#include <string>
#include <vector>

namespace cgemm::launcher {

enum class MoeRouter { kUniform, kSkewed, kOneGroup };

/// "uniform" | "skewed" | "one_group".
const char* moe_router_name(MoeRouter r);
/// The inverse of moe_router_name; throws cgemm::Error naming the value and the choices.
MoeRouter parse_moe_router(const std::string& text);

/// The Zipf exponent of the skewed router.
inline constexpr double kMoeSkewExponent = 1.2;

/// The G group sizes of the rules above, summing to `tokens`. Throws cgemm::Error when
/// tokens < 0 or > 2^31 - 1, experts < 1, empty_groups outside [0, experts), or one_group
/// with empty_groups != 0.
std::vector<int32_t> route_tokens(MoeRouter router, int64_t tokens, int64_t experts,
                                  int64_t empty_groups, uint64_t seed);

}  // namespace cgemm::launcher
