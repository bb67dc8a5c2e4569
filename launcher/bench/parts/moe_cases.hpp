#pragma once
// What the grouped GEMM studies of cgemm-bench --parts share (grouped.cpp: bf16 paths;
// grouped_fp8.cpp: FP8 paths): issue 25's five MoE cases, backend buffers released on every
// path out, and the row comparison of two outputs.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "grouped_sizes.hpp"

namespace cgemm::launcher::parts {

struct MoeCase {
  int64_t tokens, groups, k, n;
  GroupSkew skew;
};

/// Issue 25 item 5's table, in its order (docs/PERFORMANCE.md's grouped GEMM table).
const std::vector<MoeCase>& moe_cases();

inline constexpr int64_t kMoeEmptyGroups = 8;  // empty groups of a skewed case

/// `full` with tokens, K and N divided by `div` (--parts_grouped_divide): tokens at least G,
/// K and N rounded down to a multiple of `multiple` (at least `multiple`).
MoeCase divided(const MoeCase& full, int64_t div, int64_t multiple = 1);

/// "TOKENSxGxKxN".
std::string moe_name(const MoeCase& c);

/// The case's bf16 ragged-rows descriptor: lhs [tokens, K], rhs [G, N, K] (gemm.py's default
/// "T" layout), named "moe NAME"; path and dtype for the caller to set.
GroupedGemmDesc moe_desc(const MoeCase& c);

/// The path a plan's calls ran, " (fell back to the loop)" added where one did.
std::string path_text(const GroupedGemmPlan& p);

/// Backend memory released on every path out.
class BackendBuffers {
 public:
  explicit BackendBuffers(Backend& be) : be_(be) {}
  ~BackendBuffers();
  BackendBuffers(const BackendBuffers&) = delete;
  BackendBuffers& operator=(const BackendBuffers&) = delete;
  void* get(size_t bytes);

 private:
  Backend& be_;
  std::vector<void*> held_;
};

/// max |b - a| / max |a| over the first and last row of every non-empty group of two bf16
/// outputs [sum of sizes, n] (NaN if either holds a NaN there).
double rel_diff(Backend& be, const void* a_out, const void* b_out,
                const std::vector<int32_t>& sizes, int64_t n);

}  // namespace cgemm::launcher::parts
