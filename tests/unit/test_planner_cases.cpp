// Every public planner case answered in-process must match its expected answer, plus the
// JSON Lines protocol and a few gemm.py corners spelled out through the C++ API.

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "cgemm/sharding/gemm_abstract.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"
#include "line_protocol.hpp"
#include "plan_compare.hpp"
#include "plan_json.hpp"
#include "plan_schema.hpp"

namespace cgemm {
namespace {

using plan::Json;

const std::string kCases = std::string(CGEMM_TEST_DATA_DIR) + "/planner_public.jsonl";

TEST(PlannerCases, EveryPublicCaseMatches) {
  const auto cases = plan::test::load_cases(kCases);
  ASSERT_FALSE(cases.empty());
  std::map<std::string, int> passed_by_op;
  std::string failures;
  size_t failed = 0;
  for (const auto& c : cases) {
    const std::string why = plan::test::compare_answer(c.expected, plan::answer_case(c.input));
    if (why.empty()) {
      ++passed_by_op[c.input.at("op").get<std::string>()];
    } else {
      ++failed;
      failures += "  " + c.input.at("id").dump() + ": " + why + "\n";
    }
  }
  EXPECT_EQ(failed, 0u) << failed << " of " << cases.size() << " cases fail:\n" << failures;
  for (const auto& [op, n] : passed_by_op) std::cout << op << ": " << n << " passed\n";
}

// --- the JSON Lines protocol ------------------------------------------------------------

std::vector<Json> run_lines(const std::string& input, int* status) {
  std::istringstream in(input);
  std::ostringstream out, err;
  *status = plan::run_plan_lines(in, out, err);
  std::vector<Json> answers;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) answers.push_back(Json::parse(line));
  return answers;
}

TEST(PlannerProtocol, BlankLinesAreSkippedAndIdComesFirst) {
  int status = -1;
  const auto answers = run_lines(
      "\n   \n{\"id\":\"r1\",\"op\":\"reorder\",\"kind\":\"tpsp_leading\",\"shape\":[2,2],"
      "\"dp_size\":1,\"tpsp_size\":2,\"category\":\"x\"}\r\n\n",
      &status);
  EXPECT_EQ(status, 0);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].begin().key(), "id");
  EXPECT_EQ(answers[0].at("permutation"), Json::parse("[0,2,1,3]"));
}

TEST(PlannerProtocol, UnusableCasesAreAnsweredWithErrors) {
  int status = -1;
  const auto answers = run_lines(
      "[1,2]\n"
      "{\"id\":7,\"op\":\"transpose\"}\n"
      "{\"id\":8,\"op\":\"reorder\",\"kind\":\"dp_leading\",\"shape\":[2,2],\"dp_size\":1}\n"
      "{\"id\":9,\"op\":\"reorder\",\"kind\":\"dp_leading\",\"shape\":[2,2],\"dp_size\":true,"
      "\"tpsp_size\":1}\n"
      "{\"id\":{\"k\":[1]},\"op\":\"reorder\",\"kind\":\"dp_leading\",\"shape\":[2,2],"
      "\"dp_size\":1,\"tpsp_size\":1}\n",
      &status);
  EXPECT_EQ(status, 0);  // all lines were JSON
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_TRUE(answers[0].at("id").is_null());
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(answers[i].contains("error")) << answers[i];
  EXPECT_EQ(answers[1].at("id"), 7);
  EXPECT_NE(answers[2].at("error").get<std::string>().find("tpsp_size"), std::string::npos);
  EXPECT_EQ(answers[4].at("id"), Json::parse("{\"k\":[1]}"));
  EXPECT_FALSE(answers[4].contains("error"));
}

TEST(PlannerProtocol, NonJsonLineFailsTheRunButOthersAreAnswered) {
  int status = -1;
  const auto answers = run_lines(
      "{\"id\":1,\"op\":\"reorder\",\"kind\":\"dp_leading\",\"shape\":[1,1],\"dp_size\":1,"
      "\"tpsp_size\":1}\n"
      "this is not json\n"
      "{\"id\":2,\"op\":\"reorder\",\"kind\":\"dp_leading\",\"shape\":[1,1],\"dp_size\":1,"
      "\"tpsp_size\":1}\n",
      &status);
  EXPECT_NE(status, 0);
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].at("permutation"), Json::parse("[0]"));
  EXPECT_TRUE(answers[1].contains("error"));
  EXPECT_EQ(answers[2].at("id"), 2);
}

// --- gemm.py corners through the C++ API ------------------------------------------------

GemmShardingInput sp_case(PartitionSpec lhs, PartitionSpec rhs, CollectiveOp op) {
  GemmShardingInput in;
  in.mesh_resource.dp_resource = "dp";
  in.mesh_resource.tpsp_resource = "tpsp";
  in.lhs = {lhs.size(), lhs};
  in.rhs = {rhs.size(), rhs};
  in.contracting_dims = {{-1}, {0}};
  in.collective_op = op;
  return in;
}

const SpecEntry N = SpecEntry::none();
SpecEntry A(const char* a) { return SpecEntry::axis(a); }

TEST(PlannerCorners, AllGatherWithoutTpspFindsFirstUnshardedDim) {
  auto in = sp_case({A("dp"), N, N}, {N, A("tp")}, CollectiveOp::kAllGather);
  in.mesh_resource.tpsp_resource.reset();
  const GemmSharding s = infer_gemm_sharding(in);
  EXPECT_EQ(s.sequence_dim, 1);
  EXPECT_EQ(s.out, (PartitionSpec{A("dp"), N, A("tp")}));
}

TEST(PlannerCorners, AllGatherDoesNotLookInsideTuples) {
  auto in =
      sp_case({A("dp"), SpecEntry::tuple({"tpsp", "x"}), N}, {N, N}, CollectiveOp::kAllGather);
  EXPECT_THROW(infer_gemm_sharding(in), PlanError);
}

TEST(PlannerCorners, ReduceScatterWithoutReductionPassesWhenTpspIsNone) {
  auto in = sp_case({A("dp"), N, N}, {N, N}, CollectiveOp::kReduceScatter);
  EXPECT_THROW(infer_gemm_sharding(in), PlanError);  // reduce_spec None != 'tpsp'
  in.mesh_resource.tpsp_resource.reset();
  const GemmSharding s = infer_gemm_sharding(in);
  EXPECT_EQ(s.sequence_dim, 1);
  EXPECT_EQ(s.out, (PartitionSpec{A("dp"), N, N}));
  EXPECT_FALSE(s.reduce_spec.has_value());
}

TEST(PlannerCorners, MergedSpecsFollowTheListedContractingOrder) {
  // lhs (a, b, c) contracting (2, 1): non-contracting + contracting in listed order.
  auto in = sp_case({A("a"), A("b"), A("c")}, {A("c"), N, N}, CollectiveOp::kNone);
  in.contracting_dims = {{2, 1}, {0, 1}};
  const GemmSharding s = infer_gemm_sharding(in);
  ASSERT_TRUE(s.reduce_spec.has_value());
  EXPECT_EQ(*s.reduce_spec, A("c"));
  EXPECT_EQ(s.lhs, (PartitionSpec{A("a"), A("c"), N}));
  EXPECT_EQ(s.rhs, (PartitionSpec{A("c"), N, N}));
}

TEST(PlannerCorners, EmptyContractingDimsAreAnError) {
  auto in = sp_case({N, N}, {N, N}, CollectiveOp::kNone);
  in.contracting_dims = {{}, {0}};
  EXPECT_THROW(infer_gemm_sharding(in), PlanError);

  GemmAbstractInput a;
  a.lhs = {{4, 16}, DType::kBFloat16};
  a.rhs = {{16, 8}, DType::kBFloat16};
  a.out_dtype = DType::kBFloat16;
  a.contracting_dims = {{-1}, {}};
  EXPECT_THROW(gemm_abstract(a), PlanError);
  a.contracting_dims = {{-1}, {0}};
  EXPECT_EQ(gemm_abstract(a).out_shape, (Shape{4, 8}));
}

TEST(PlannerCorners, InnerReduceScatterFloorsDimOne) {
  GemmAbstractInput a;
  a.lhs = {{2, 10, 32}, DType::kBFloat16};
  a.rhs = {{32, 8}, DType::kBFloat16};
  a.out_dtype = DType::kBFloat16;
  a.contracting_dims = {{2}, {0}};
  a.collective_op = CollectiveOp::kReduceScatter;
  a.tpsp_size = 4;
  a.num_max_streams = 3;
  a.compute_capability = 80;
  const GemmAbstract r = gemm_abstract(a);
  EXPECT_EQ(r.out_shape, (Shape{2, 2, 8}));
  EXPECT_EQ(r.workspace_bytes, 4'194'304 * 3 + 256);
  a.is_outer = true;
  EXPECT_EQ(gemm_abstract(a).out_shape, (Shape{2, 10, 8}));
}

}  // namespace
}  // namespace cgemm
