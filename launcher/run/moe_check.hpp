#pragma once
// The check of cgemm-run's MoE experiment (moe_block.hpp): one grouped GEMM of the ragged-rows
// form against an fp64 reference computed on the host, group by group, from the very inputs
// the GEMM read (copied back from the backend, so the inputs' rounding to the dtype is no error).
//
// Shapes (row-major; the MoE block's layouts): lhs [M, K], rhs [G, K, N], out [M, N], group g
// owning the rows [off_g, off_g + size_g) of lhs and out: out[rows of g] = lhs[rows of g] @
// rhs[g]. An element of group g, row i, column j, with r = sum_p lhs[i, p] rhs[g, p, j] in fp64
// and mag = sum_p |lhs[i, p] rhs[g, p, j]|, passes when
//     |out - r| <= eps x |r| + acc x K x mag + tiny
// (a NaN fails). eps covers the output's rounding (two roundings at most): 2^-7 for bfloat16,
// 2^-10 for float16, 2^-21 for float32 outputs (the bounds of tests/mpi/test_grouped_plan.cpp);
// tiny, the dtype's smallest subnormal (2^-133, 2^-24, 2^-149), the same two roundings where
// the output is subnormal and its spacing absolute (float16 below 2^-14, which outputs of a
// few 1e-5 reach).
// acc x K x mag covers the accumulation: the CUDA backend accumulates in fp32 (cuBLASLt's
// CUBLAS_COMPUTE_32F), at most K x 2^-24 x mag in any summation order, taken as acc = 2^-23
// (a factor 2 to spare); the CPU backend accumulates in fp64: acc = 2^-50.
//
// Rows checked: every row of every group, or with rows_per_group = R > 0 at most R rows of each
// group: its first and last and R - 2 evenly spaced between (row i * (size - 1) / (R - 1)),
// every column of each; a large run checks part of each group, every group (empty ones hold
// no rows to check).

#include <cstdint>
#include <span>
#include <string>

#include "cgemm/core/dtype.hpp"

namespace cgemm::launcher {

struct GroupedRowsCheck {
  int64_t compared = 0;
  int64_t failures = 0;
  int64_t rows = 0;           // rows compared
  double max_abs = 0.0;       // max |out - r| over finite outputs
  double max_ratio = 0.0;     // max |out - r| / bound over finite outputs (<= 1 passes)
  std::string first_failure;  // "group 3 row 17 col 5: got ..., reference ..., bound ..."
  void merge(const GroupedRowsCheck& o);
};

/// eps of the rule above for an output dtype (bfloat16, float16, float32); throws cgemm::Error
/// for others.
double output_eps(DType out);
/// tiny of the rule above: the smallest subnormal of bfloat16, float16, float32; throws
/// cgemm::Error for others.
double output_tiny(DType out);
/// acc of the rule above: fp32 accumulation (CUDA backend) or fp64 (CPU backend).
double accumulation_eps(bool fp32_accumulation);

/// Checks `out` against the fp64 reference, by the rule and the row choice above. lhs, rhs and
/// out hold the values as floats (sizes as stated at the top); `sizes` sums to M. Throws
/// cgemm::Error when the spans' lengths do not match the shapes.
GroupedRowsCheck check_ragged_rows(std::span<const float> lhs, std::span<const float> rhs,
                                   std::span<const float> out, std::span<const int32_t> sizes,
                                   int64_t k, int64_t n, int64_t rows_per_group, double eps,
                                   double acc, double tiny);

}  // namespace cgemm::launcher
