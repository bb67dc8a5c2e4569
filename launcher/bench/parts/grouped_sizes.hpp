#pragma once
// The group sizes of cgemm-bench --parts grouped (issue 25's MoE cases), one deterministic
// rule that bench/peers/torch_grouped_mm.py repeats line for line (integer arithmetic only,
// so both print the same vectors):
//  - uniform: group g gets tokens / G rows, plus one for the first tokens % G groups.
//  - skewed (E empty groups, E dividing G, tokens >= G - E): group g is empty when
//    g % (G / E) == G / E - 1 (G = 64, E = 8: groups 7, 15, ..., 63). The A = G - E others,
//    in index order, take Zipf ranks r = 0 .. A - 1 (exponent 1) with integer weights
//    w_r = floor(2^20 / (r + 1)), W = sum of w_r; rank r gets
//    1 + floor((tokens - A) * w_r / W) rows (so none is empty), and the rows left over
//    (fewer than A) go one each to ranks 0, 1, ... The sizes sum to tokens exactly.
//    (G = 64, E = 8: 65536 tokens give 14201 rows to group 0 and 254 to group 62; 16384
//    tokens give 3542 and 64.)

#include <cstdint>
#include <string>
#include <vector>

namespace cgemm::launcher::parts {

enum class GroupSkew { kUniform, kSkewed };

/// "uniform" or "skewed, E empty".
std::string group_skew_text(GroupSkew skew, int64_t empty);

/// The G sizes of the rule above. Throws cgemm::Error for G < 1, tokens < 0, a skewed split
/// whose E does not divide G (or E >= G), or fewer tokens than non-empty groups.
std::vector<int32_t> moe_group_sizes(int64_t tokens, int64_t groups, GroupSkew skew,
                                     int64_t empty = 8);

}  // namespace cgemm::launcher::parts
