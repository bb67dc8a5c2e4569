// gemm.py's grouped GEMM rules that the public planner cases do not reach, through the C++
// API. Each test names the seed line it follows (Transformer Engine's JAX gemm.py).

#include <gtest/gtest.h>

#include <string>

#include "cgemm/core/error.hpp"
#include "cgemm/sharding/grouped_gemm.hpp"

namespace cgemm {
namespace {

// A forward grouped GEMM: lhs (M, K) ragged in M over `groups`, rhs (G, N, K).
GroupedGemmInput fwd_case(int64_t groups = 4) {
  GroupedGemmInput in;
  in.lhs.original_shape = {64, 32};
  in.lhs.first_dims_size = groups;
  in.rhs.original_shape = {groups, 16, 32};
  in.lhs_contracting_dims = {1};
  in.rhs_contracting_dims = {2};
  in.setup_workspace_size = 512;
  return in;
}

// _should_enforce_v2_grouped_gemm: `return bool(int(val))`, val = os.getenv(..., "0"); a
// ValueError from int() is re-raised.
TEST(PlannerGrouped, EnforceEnvReadsLikePythonInt) {
  const auto enforce = [](const char* v) { return should_enforce_v2_grouped_gemm(std::string(v)); };
  EXPECT_FALSE(should_enforce_v2_grouped_gemm(std::nullopt));  // unset reads "0"
  EXPECT_TRUE(enforce("1_0"));                                 // '_' between digits
  EXPECT_FALSE(enforce("0_0"));
  EXPECT_FALSE(enforce("\t-0\n"));  // whitespace around, a sign
  EXPECT_TRUE(
      enforce("\xe3\x80\x80"
              "1\xc2\xa0"));                              // U+3000 and U+00A0 strip like spaces
  EXPECT_TRUE(enforce("\xd9\xa1"));                       // U+0661 ARABIC-INDIC DIGIT ONE
  EXPECT_FALSE(enforce("\xef\xbc\x90"));                  // U+FF10 FULLWIDTH DIGIT ZERO
  EXPECT_FALSE(enforce(std::string(4300, '0').c_str()));  // CPython's digit limit, inclusive
  for (const std::string bad :
       {"_1", "1_", "1__0", "+_1", "", " ", "0x1", "1.0", "+-1", "- 1", "1 2",
        "\x1c"
        "1",
        "\x7f"
        "1",
        "yes"}) {
    EXPECT_THROW(should_enforce_v2_grouped_gemm(bad), PlanError) << '"' << bad << '"';
  }
  EXPECT_THROW(should_enforce_v2_grouped_gemm(std::string(4301, '0')), PlanError);
  EXPECT_THROW(should_enforce_v2_grouped_gemm(std::string("1\0", 2)), PlanError);
}

// _can_use_v2_grouped_gemm calls _should_enforce_v2_grouped_gemm before anything else, so a
// bad value raises even when the v2 library is not available.
TEST(PlannerGrouped, BadEnforceEnvFailsEvenWithoutV2) {
  GroupedGemmInput in = fwd_case();
  in.v2_available = false;
  EXPECT_FALSE(grouped_gemm(in).use_v2_ffi);
  in.enforce_v2_env = "1_";
  EXPECT_THROW(grouped_gemm(in), PlanError);
}

// _assert_grouped_gemm_dims_shapes: `assert aval.size == num_groups` for every non-empty
// array, lhs_last_dims too (num_groups came from lhs_first_dims).
TEST(PlannerGrouped, EveryNonEmptyDimsArrayHasNumGroups) {
  GroupedGemmInput in = fwd_case(4);
  in.lhs.last_dims_size = 3;
  EXPECT_THROW(grouped_gemm(in), PlanError);
  in.lhs.last_dims_size = 4;
  const GroupedGemm g = grouped_gemm(in);
  EXPECT_EQ(g.num_gemms, 4);
  EXPECT_EQ(g.out_first_dims_size, 4);  // out takes lhs_first_dims, not lhs_last_dims
  EXPECT_EQ(g.out_last_dims_size, 0);
}

// A tensor-scaled pair below compute capability 100, both operands scaled, rhs in T layout.
GroupedGemmInput hopper_case(Shape rhs_shape, std::vector<int64_t> rhs_cd) {
  GroupedGemmInput in = fwd_case(2);
  in.compute_capability = 90;
  for (GroupedOperand* op : {&in.lhs, &in.rhs}) {
    op->scaled = true;
    op->dtype = DType::kFloat8E4M3;
    op->scaling_mode = ScalingMode::kDelayedTensorScaling;
    op->scale_inv_size = 1;
  }
  in.rhs.layout_is_t = true;
  in.rhs.original_shape = std::move(rhs_shape);
  in.rhs_contracting_dims = std::move(rhs_cd);
  return in;
}

// The rhs T-layout remap `(rhs_ndim - 1 - i) % (rhs_ndim - 1) + 1` when lhs has ragged dims:
// a 1-D rhs divides by zero (ZeroDivisionError).
TEST(PlannerGrouped, RhsRemapModuloZeroIsAnError) {
  GroupedGemmInput in = hopper_case({32}, {1});  // rhs_is_trans false, as layout T needs
  EXPECT_THROW(grouped_gemm(in), PlanError);
}

// The same remap on a 0-D rhs is `(-1 - 0) % -1 + 1` = 1 (Python's modulo takes the
// divisor's sign), so the boundary is 1; with ragged rhs dims too,
// `tuple(rhs_shape[d] for d in range(rhs_axis_boundary))` reads rhs_shape[0]: IndexError.
TEST(PlannerGrouped, TransposedRhsIndexesPastItsShape) {
  GroupedGemmInput in = hopper_case({}, {0});
  in.rhs.first_dims_size = 2;
  EXPECT_THROW(grouped_gemm(in), PlanError);
  // Without ragged rhs dims, dim 0 is skipped: range(1) minus {0} reads nothing.
  in.rhs.first_dims_size = 0;
  const GroupedGemm g = grouped_gemm(in);
  EXPECT_EQ(g.rhs_contracting_dims, (std::vector<int64_t>{1}));
  EXPECT_EQ(g.rhs_axis_boundary, 1);
  EXPECT_TRUE(g.rhs_is_trans);
  EXPECT_EQ(g.out_shape, (Shape{64}));  // lhs (64,) and nothing from rhs
  EXPECT_EQ(g.rhs_left_size, 1);        // math.prod(()) of the empty shape's slices
  EXPECT_EQ(g.rhs_right_size, 1);
}

// `math.prod(lhs_shape[:lhs_axis_boundary])` is exactly 0 when a dim is 0, however large
// the dims before it.
TEST(PlannerGrouped, ZeroDimMakesSizeZeroWhateverTheOthers) {
  GroupedGemmInput in = fwd_case();
  const int64_t big = int64_t{1} << 40;
  in.lhs.original_shape = {big, big, 0, 32};
  in.lhs_contracting_dims = {3};
  const GroupedGemm g = grouped_gemm(in);
  EXPECT_EQ(g.lhs_axis_boundary, 3);
  EXPECT_EQ(g.lhs_left_size, 0);
  EXPECT_EQ(g.lhs_right_size, 32);
  EXPECT_EQ(g.out_shape, (Shape{big, big, 0, 16}));
  // Without the zero the product does not fit in 64 bits: an error, not a wrapped size.
  in.lhs.original_shape = {big, big, 1, 32};
  EXPECT_THROW(grouped_gemm(in), Error);
}

// `assert bias.shape == (num_gemms, N_dim)` with N_dim = math.prod(rhs_non_contracting):
// an N past 64 bits cannot match any bias. (rhs dim 0 is 0, so rhs_left_size is 0 and fits.)
TEST(PlannerGrouped, BiasWithUnrepresentableNIsAMismatch) {
  GroupedGemmInput in = fwd_case(2);
  const int64_t big = int64_t{1} << 40;
  in.rhs.original_shape = {0, big, big, 32};
  in.rhs_contracting_dims = {3};
  EXPECT_EQ(grouped_gemm(in).out_shape, (Shape{64, big, big}));  // fine without a bias
  in.rhs_contracting_dims = {3};
  in.bias_shape = Shape{2, 0};
  EXPECT_THROW(grouped_gemm(in), PlanError);
  in.rhs.original_shape = {2, 8, 4, 32};
  in.bias_shape = Shape{2, 32};
  const GroupedGemm g = grouped_gemm(in);
  EXPECT_TRUE(g.has_bias);
  EXPECT_EQ(g.out_shape, (Shape{64, 8, 4}));
}

}  // namespace
}  // namespace cgemm
