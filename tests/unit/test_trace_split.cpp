// launcher/train/trace_split: the busy times of a call's GEMMs and communication are unions over
// lanes (two streams' GEMMs at once count once), the hidden time their intersection, each call
// apart from the others; spans of other categories and of no call are left out.

#include <gtest/gtest.h>

#include <vector>

#include "train/trace_split.hpp"

namespace cgemm::launcher {
namespace {

TraceSpan span(const char* category, const char* group, double a, double b, int lane = 0) {
  TraceSpan s;
  s.name = category;
  s.category = category;
  s.group = group;
  s.lane = lane;
  s.start_ms = a;
  s.end_ms = b;
  return s;
}

TEST(TraceSplit, UnionsPerCategoryAndTheirOverlap) {
  const std::vector<TraceSpan> t = {
      span("call", "up", 0, 10, -1),       span("gemm", "up", 1, 4, 0),
      span("gemm", "up", 3, 6, 1),  // overlaps the first on another stream: [1, 6] once
      span("gemm", "up", 8, 9, 0),         span("transfer", "up", 0, 2, 2),
      span("collective", "up", 5, 8.5, 3),  // hidden: [1, 2] and [5, 6] and [8, 8.5]
      span("other", "up", 0, 10, 4),        // neither
      span("call", "down", 10, 13, -1),    span("transfer", "down", 10, 12, 2),  // nothing hides it
      span("gemm", "down", 12, 13, 0),     span("gemm", "none", 0, 100, 0),      // of no call
  };
  const std::vector<CallSplit> s = split_calls(t);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].call, "up");
  EXPECT_DOUBLE_EQ(s[0].wall_ms, 10.0);
  EXPECT_DOUBLE_EQ(s[0].gemm_ms, 6.0);
  EXPECT_DOUBLE_EQ(s[0].comm_ms, 5.5);
  EXPECT_DOUBLE_EQ(s[0].hidden_ms, 2.5);
  EXPECT_EQ(s[1].call, "down");
  EXPECT_DOUBLE_EQ(s[1].wall_ms, 3.0);
  EXPECT_DOUBLE_EQ(s[1].gemm_ms, 1.0);
  EXPECT_DOUBLE_EQ(s[1].comm_ms, 2.0);
  EXPECT_DOUBLE_EQ(s[1].hidden_ms, 0.0);
}

TEST(TraceSplit, NoCallsNoRows) { EXPECT_TRUE(split_calls({span("gemm", "x", 0, 1)}).empty()); }

}  // namespace
}  // namespace cgemm::launcher
