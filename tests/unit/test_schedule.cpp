// The ring schedules, simulated over every rank of a group: each rank must receive every
// chunk exactly once, forward only chunks it already holds, and every send must meet the
// matching receive of its peer in the same step.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "cgemm/runtime/schedule.hpp"

namespace cgemm {
namespace {

class ScheduleAllGather : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ScheduleAllGather, EveryRankComputesEveryChunkOnceFromDataItHolds) {
  const auto [tp, aggregate] = GetParam();
  std::vector<std::vector<AllGatherStep>> plans;
  for (int r = 0; r < tp; ++r) plans.push_back(all_gather_schedule(tp, r, aggregate));
  for (int r = 0; r < tp; ++r) ASSERT_EQ(plans[r].size(), plans[0].size()) << "rank " << r;

  std::vector<std::set<int>> held(static_cast<size_t>(tp));
  std::vector<std::multiset<int>> computed(static_cast<size_t>(tp));
  for (int r = 0; r < tp; ++r) held[static_cast<size_t>(r)].insert(r);
  for (size_t step = 0; step < plans[0].size(); ++step) {
    // (sender, receiver, chunk) triples posted in this step, from both ends.
    std::multiset<std::tuple<int, int, int>> sends, recvs;
    for (int r = 0; r < tp; ++r) {
      const AllGatherStep& s = plans[static_cast<size_t>(r)][step];
      for (int c : s.compute) {
        EXPECT_TRUE(held[static_cast<size_t>(r)].count(c))
            << "rank " << r << " computes chunk " << c << " before holding it, step " << step;
        computed[static_cast<size_t>(r)].insert(c);
      }
      for (const ChunkTransfer& t : s.transfers) {
        EXPECT_NE(t.send_peer, r);
        EXPECT_NE(t.recv_peer, r);
        EXPECT_TRUE(held[static_cast<size_t>(r)].count(t.send_chunk))
            << "rank " << r << " forwards chunk " << t.send_chunk << " it does not hold";
        sends.insert({r, t.send_peer, t.send_chunk});
        recvs.insert({t.recv_peer, r, t.recv_chunk});
      }
    }
    EXPECT_EQ(sends, recvs) << "unmatched send/recv in step " << step;
    for (const auto& [from, to, chunk] : recvs) held[static_cast<size_t>(to)].insert(chunk);
  }
  for (int r = 0; r < tp; ++r) {
    std::multiset<int> all;
    for (int c = 0; c < tp; ++c) all.insert(c);
    EXPECT_EQ(computed[static_cast<size_t>(r)], all) << "rank " << r;
  }
}

TEST_P(ScheduleAllGather, StepCount) {
  const auto [tp, aggregate] = GetParam();
  const size_t expected = aggregate ? static_cast<size_t>(tp / 2 + 1) : static_cast<size_t>(tp);
  EXPECT_EQ(all_gather_schedule(tp, 0, aggregate).size(), expected);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ScheduleAllGather,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Bool()));

class ScheduleReduceScatter : public ::testing::TestWithParam<int> {};

TEST_P(ScheduleReduceScatter, EveryRankGetsOnePartialFromEveryOtherRank) {
  const int tp = GetParam();
  std::vector<std::vector<ReduceScatterStep>> plans;
  for (int r = 0; r < tp; ++r) plans.push_back(reduce_scatter_schedule(tp, r));
  std::vector<std::multiset<int>> got(static_cast<size_t>(tp));
  for (int s = 0; s < tp; ++s) {
    std::multiset<std::pair<int, int>> sends, recvs;
    for (int r = 0; r < tp; ++r) {
      const ReduceScatterStep& st = plans[static_cast<size_t>(r)][static_cast<size_t>(s)];
      if (st.dest != r) {
        sends.insert({r, st.dest});
        ASSERT_GE(st.recv_from, 0);
        recvs.insert({st.recv_from, r});
        got[static_cast<size_t>(r)].insert(st.recv_from);
      } else {
        EXPECT_EQ(st.recv_from, -1);
        EXPECT_EQ(s, tp - 1) << "own partial must come last so others' transfers overlap it";
      }
    }
    EXPECT_EQ(sends, recvs) << "step " << s;
  }
  for (int r = 0; r < tp; ++r) {
    std::multiset<int> others;
    for (int p = 0; p < tp; ++p)
      if (p != r) others.insert(p);
    EXPECT_EQ(got[static_cast<size_t>(r)], others) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ScheduleReduceScatter, ::testing::Values(1, 2, 3, 4, 7, 8));

TEST(Schedule, RejectsRankOutsideGroup) {
  EXPECT_THROW(all_gather_schedule(2, 2, false), std::exception);
  EXPECT_THROW(reduce_scatter_schedule(0, 0), std::exception);
  EXPECT_THROW(reduce_scatter_schedule(4, -1), std::exception);
}

}  // namespace
}  // namespace cgemm
