#pragma once
// What the grouped GEMM studies of cgemm-bench --parts share (grouped.cpp: bf16 paths;
// grouped_fp8.cpp: FP8 paths): issue 25's five MoE cases, backend buffers released on every
// path out, and the row comparison of two outputs.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "grouped_sizes.hpp"

namespace cgemm::launcher::parts {

struct MoeCase {
  int64_t tokens, groups, k, n;
  GroupSkew skew;
};

/// Issue 25 item 5's table, in its order (docs/PERFORMANCE.md's grouped GEMM table).
const std::vector<MoeCase>& moe_cases();

inline constexpr int64_t kMoeEmptyGroups = 8;  // empty groups of a skewed case

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
