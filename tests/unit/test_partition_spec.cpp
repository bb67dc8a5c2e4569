// pad_spec, local_shape, spec_str and the name tables (core/ dtypes, collectives; scaling modes).

#include <gtest/gtest.h>

#include <string>

#include "../support/error_of.hpp"
#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/sharding/partition_spec.hpp"
#include "cgemm/sharding/scaling_mode.hpp"

namespace cgemm {
namespace {

const SpecEntry N = SpecEntry::none();

Mesh test_mesh() { return Mesh{{{"dp", 2}, {"tpsp", 4}, {"fsdp", 3}}}; }

using test::error_of;

bool mentions(const std::string& msg, const std::string& what) {
  return msg.find(what) != std::string::npos;
}

TEST(PlannerPartitionSpec, PadSpec) {
  EXPECT_EQ(pad_spec(std::nullopt, 3, "lhs"), (PartitionSpec{N, N, N}));
  EXPECT_EQ(pad_spec(PartitionSpec{SpecEntry::axis("dp")}, 3, "lhs"),
            (PartitionSpec{SpecEntry::axis("dp"), N, N}));
  const PartitionSpec full{SpecEntry::axis("dp"), SpecEntry::tuple({"tpsp", "fsdp"})};
  EXPECT_EQ(pad_spec(full, 2, "rhs"), full);
  EXPECT_EQ(pad_spec(PartitionSpec{}, 0, "rhs"), PartitionSpec{});
}

TEST(PlannerPartitionSpec, PadSpecTooLongNamesTheOperand) {
  const PartitionSpec spec{SpecEntry::axis("dp"), N, N};
  EXPECT_THROW(pad_spec(spec, 2, "bias"), PlanError);
  const std::string msg = error_of([&] { pad_spec(spec, 2, "bias"); });
  EXPECT_TRUE(mentions(msg, "bias")) << msg;
  EXPECT_TRUE(mentions(msg, "('dp', None, None)")) << msg;
}

TEST(PlannerPartitionSpec, SpecStrIsPythonRepr) {
  EXPECT_EQ(spec_str({SpecEntry::axis("dp"), SpecEntry::axis("tpsp"), N}), "('dp', 'tpsp', None)");
  EXPECT_EQ(spec_str({SpecEntry::axis("dp")}), "('dp',)");
  EXPECT_EQ(spec_str({SpecEntry::tuple({"dp", "fsdp"}), N}), "(('dp', 'fsdp'), None)");
  EXPECT_EQ(spec_str({}), "()");
}

TEST(PlannerPartitionSpec, ParseSpecReadsSpecStr) {
  // Every spec_str form reads back to the spec it came from.
  for (const PartitionSpec& spec :
       {PartitionSpec{SpecEntry::axis("dp"), SpecEntry::axis("tpsp"), N},
        PartitionSpec{SpecEntry::axis("dp")}, PartitionSpec{SpecEntry::tuple({"dp", "fsdp"}), N},
        PartitionSpec{SpecEntry::tuple({"tpsp"})}, PartitionSpec{}}) {
    EXPECT_EQ(parse_spec(spec_str(spec)), spec) << spec_str(spec);
  }
}

TEST(PlannerPartitionSpec, ParseSpecTakesPythonsOtherSpellings) {
  const PartitionSpec dp_tpsp_none{SpecEntry::axis("dp"), SpecEntry::axis("tpsp"), N};
  EXPECT_EQ(parse_spec(" ( \"dp\",'tpsp' ,None , ) "), dp_tpsp_none);
  EXPECT_EQ(parse_spec("PartitionSpec('dp', 'tpsp', None)"), dp_tpsp_none);
  EXPECT_EQ(parse_spec("P('dp', 'tpsp', None)"), dp_tpsp_none);
  // Parentheses without a comma group, as in Python: ('a') is the name 'a'.
  EXPECT_EQ(parse_spec("('dp')"), PartitionSpec{SpecEntry::axis("dp")});
  EXPECT_EQ(parse_spec("'dp'"), PartitionSpec{SpecEntry::axis("dp")});
  EXPECT_EQ(parse_spec("(('dp'), None)"), (PartitionSpec{SpecEntry::axis("dp"), N}));
  EXPECT_EQ(parse_spec("(('dp',), None)"), (PartitionSpec{SpecEntry::tuple({"dp"}), N}));
}

TEST(PlannerPartitionSpec, ParseSpecErrorsQuoteTheTextAndTheOffset) {
  EXPECT_EQ(error_of([] { parse_spec("('dp' 'tpsp')"); }),
            "partition spec \"('dp' 'tpsp')\": expected ',' or ')' at offset 6, found ''' "
            "(write it as Python does, e.g. \"('dp', 'tpsp', None)\")");
  EXPECT_NE(error_of([] { parse_spec("('dp', ())"); }).find("empty tuple is no entry"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_spec("('', None)"); }).find("a non-empty axis name at offset 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_spec("('dp', None"); }).find("found the end"), std::string::npos);
  EXPECT_NE(error_of([] { parse_spec("('dp',) x"); }).find("nothing after the spec at offset 8"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_spec("(dp, None)"); }).find("a quoted axis name at offset 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_spec("('dp"); }).find("the closing '"), std::string::npos);
  EXPECT_NE(error_of([] { parse_spec(""); }).find("expected '(' at offset 0"), std::string::npos);
}

TEST(PlannerPartitionSpec, LocalShapeDividesByEveryAxisOfAnEntry) {
  const Mesh mesh = test_mesh();
  EXPECT_EQ(mesh.size(), 24);
  EXPECT_EQ(
      local_shape({8, 16, 5}, {SpecEntry::axis("dp"), SpecEntry::axis("tpsp"), N}, mesh, "lhs"),
      (Shape{4, 4, 5}));
  EXPECT_EQ(local_shape({24, 7}, {SpecEntry::tuple({"tpsp", "fsdp"})}, mesh, "rhs"), (Shape{2, 7}));
  EXPECT_EQ(local_shape({0, 7}, {SpecEntry::axis("fsdp")}, mesh, "rhs"), (Shape{0, 7}));
}

TEST(PlannerPartitionSpec, LocalShapeErrorsNameOperandDimShapeAndAxes) {
  const Mesh mesh = test_mesh();
  const std::string msg = error_of([&] {
    local_shape({8, 18}, {N, SpecEntry::tuple({"tpsp", "fsdp"})}, mesh, "rhs");
  });
  ASSERT_FALSE(msg.empty());
  EXPECT_TRUE(mentions(msg, "rhs")) << msg;
  EXPECT_TRUE(mentions(msg, "dim 1")) << msg;
  EXPECT_TRUE(mentions(msg, "[8, 18]")) << msg;
  EXPECT_TRUE(mentions(msg, "('tpsp', 'fsdp')")) << msg;

  const std::string unknown =
      error_of([&] { local_shape({8}, {SpecEntry::axis("tp")}, mesh, "lhs"); });
  EXPECT_TRUE(mentions(unknown, "'tp'")) << unknown;
  EXPECT_THROW(local_shape({8}, {N, N}, mesh, "lhs"), Error);
  EXPECT_THROW((void)mesh.axis_size("tp"), Error);
}

TEST(PlannerTypes, NamesRoundTrip) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat8E4M3,
                  DType::kFloat8E5M2, DType::kFloat4E2M1}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(parse_dtype("bf16"), DType::kBFloat16);
  EXPECT_EQ(dtype_size(DType::kFloat4E2M1), 1u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_THROW(parse_dtype("float64"), Error);
  for (auto m : {ScalingMode::kNoScaling, ScalingMode::kDelayedTensorScaling,
                 ScalingMode::kCurrentTensorScaling, ScalingMode::kMxfp8_1d, ScalingMode::kNvfp4_1d,
                 ScalingMode::kNvfp4_2d}) {
    EXPECT_EQ(parse_scaling_mode(scaling_mode_name(m)), m);
  }
  EXPECT_TRUE(is_1d_block_scaling(ScalingMode::kNvfp4_2d));
  EXPECT_FALSE(is_1d_block_scaling(ScalingMode::kCurrentTensorScaling));
  EXPECT_EQ(parse_collective("reduce_scatter"), CollectiveOp::kReduceScatter);
  EXPECT_THROW(parse_collective("all_reduce"), Error);
  EXPECT_EQ(shape_str({4, 8192}), "[4, 8192]");
  EXPECT_EQ(num_elements({}), 1);
}

}  // namespace
}  // namespace cgemm
