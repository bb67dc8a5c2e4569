// The GEMM tuner's policy (gemm/src/candidate_tuner) on a fake matmul: fake times per candidate
// and round, fake failures. No GPU: the order of the runs, the median, ties and failures are
// checked as the cuBLASLt tuner relies on them (docs/GEMM_TUNER.md).

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "candidate_tuner.hpp"

namespace cgemm::detail {
namespace {

// Candidate i's r-th timed run takes times[i][r] ms; fails_at_warm_up / fails_at_round make it
// fail there. Every call is logged ("w0" = warm-up of 0, "t3:1" = timed run 3 of 1, "p15" =
// prepare(15), "e" = elapsed_ms()).
class FakeMatmul final : public CandidateRunner {
 public:
  explicit FakeMatmul(std::vector<std::vector<double>> times) : times_(std::move(times)) {
    rounds_done_.assign(times_.size(), 0);
  }
  std::set<size_t> fails_at_warm_up;
  std::vector<std::pair<size_t, size_t>> fails_at_round;  // (candidate, round)
  std::vector<std::string> log;

  bool warm_up(size_t candidate) override {
    log.push_back("w" + std::to_string(candidate));
    return fails_at_warm_up.count(candidate) == 0;
  }
  void prepare(size_t runs) override {
    log.push_back("p" + std::to_string(runs));
    elapsed_.assign(runs, -7.0);  // a run that is not made keeps a value that must not be read
  }
  bool timed_run(size_t run, size_t candidate) override {
    log.push_back("t" + std::to_string(run) + ":" + std::to_string(candidate));
    const size_t round = rounds_done_[candidate]++;
    for (const auto& [c, r] : fails_at_round) {
      if (c == candidate && r == round) {
        elapsed_.at(run) = 0.0;  // a failed run is fast: it must not win
        return false;
      }
    }
    elapsed_.at(run) = times_.at(candidate).at(round);
    return true;
  }
  std::vector<double> elapsed_ms() override {
    log.push_back("e");
    return elapsed_;
  }

 private:
  std::vector<std::vector<double>> times_;
  std::vector<size_t> rounds_done_;
  std::vector<double> elapsed_;
};

std::vector<std::string> timed_order(const std::vector<std::string>& log) {
  std::vector<std::string> out;
  for (const std::string& s : log) {
    if (s[0] == 't') out.push_back(s);
  }
  return out;
}

// The median decides, not the minimum nor the mean: candidate 0 has the fastest single run,
// candidate 2 the lowest mean, candidate 1 the lowest median.
TEST(CandidateTuner, PicksTheFastestMedian) {
  FakeMatmul fake({{0.1, 3.0, 3.0, 3.0, 3.0},    // min 0.1, median 3.0
                   {2.0, 2.0, 2.0, 9.0, 9.0},    // median 2.0, mean 4.8
                   {2.5, 2.5, 2.5, 2.5, 2.5}});  // median 2.5, mean 2.5
  const Tuning r = time_candidates(3, 5, fake);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.chosen, 1u);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_EQ(r.median_ms, (std::vector<double>{3.0, 2.0, 2.5}));
}

// Warm-ups first, then prepare, then round after round every candidate once in turn; the times
// are read once, at the end.
TEST(CandidateTuner, RunsInInterleavedRounds) {
  FakeMatmul fake({{1, 1}, {2, 2}, {3, 3}});
  time_candidates(3, 2, fake);
  EXPECT_EQ(fake.log, (std::vector<std::string>{"w0", "w1", "w2", "p6", "t0:0", "t1:1", "t2:2",
                                                "t3:0", "t4:1", "t5:2", "e"}));
}

// The median of an even number of runs is the upper one.
TEST(CandidateTuner, EvenRoundsTakeTheUpperMedian) {
  FakeMatmul fake({{4.0, 1.0, 3.0, 2.0}, {5.0, 5.0, 5.0, 5.0}});
  const Tuning r = time_candidates(2, 4, fake);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.median_ms[0], 3.0);
  EXPECT_EQ(r.chosen, 0u);
}

// A candidate that fails its warm-up is never timed: the rounds interleave the others only.
TEST(CandidateTuner, WarmUpFailureIsLeftOut) {
  FakeMatmul fake({{1.0, 1.0}, {0.5, 0.5}, {2.0, 2.0}});
  fake.fails_at_warm_up = {1};
  const Tuning r = time_candidates(3, 2, fake);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.chosen, 0u);
  EXPECT_EQ(r.failed, 1u);
  EXPECT_EQ(r.median_ms, (std::vector<double>{1.0, -1.0, 2.0}));
  EXPECT_EQ(timed_order(fake.log), (std::vector<std::string>{"t0:0", "t1:2", "t2:0", "t3:2"}));
}

// A candidate that fails in a timed round is not run again and its times are not used, even
// though it was the fastest until then.
TEST(CandidateTuner, TimedFailureIsLeftOut) {
  FakeMatmul fake({{0.5, 0.5, 0.5}, {1.0, 1.0, 1.0}, {2.0, 2.0, 2.0}});
  fake.fails_at_round = {{0, 1}};
  const Tuning r = time_candidates(3, 3, fake);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.chosen, 1u);
  EXPECT_EQ(r.failed, 1u);
  EXPECT_EQ(r.median_ms, (std::vector<double>{-1.0, 1.0, 2.0}));
  EXPECT_EQ(timed_order(fake.log), (std::vector<std::string>{"t0:0", "t1:1", "t2:2", "t3:0", "t4:1",
                                                             "t5:2", "t7:1", "t8:2"}));
}

// Equal medians: the earlier candidate (the heuristic's order) wins.
TEST(CandidateTuner, TiesGoToTheEarlierCandidate) {
  FakeMatmul all_equal({{1.0, 1.0, 1.0}, {1.0, 1.0, 1.0}, {1.0, 1.0, 1.0}});
  const Tuning a = time_candidates(3, 3, all_equal);
  ASSERT_TRUE(a.ok);
  EXPECT_EQ(a.chosen, 0u);

  FakeMatmul later_tie({{3.0, 3.0, 3.0}, {1.0, 2.0, 3.0}, {2.0, 2.0, 0.5}});
  const Tuning b = time_candidates(3, 3, later_tie);
  ASSERT_TRUE(b.ok);
  EXPECT_EQ(b.chosen, 1u);
  EXPECT_EQ(b.median_ms[1], b.median_ms[2]);
}

TEST(CandidateTuner, OneCandidate) {
  FakeMatmul fake({{2.0, 1.0, 3.0}});
  const Tuning r = time_candidates(1, 3, fake);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.chosen, 0u);
  EXPECT_EQ(r.median_ms, (std::vector<double>{2.0}));
  EXPECT_EQ(fake.log, (std::vector<std::string>{"w0", "p3", "t0:0", "t1:0", "t2:0", "e"}));
}

// Every candidate fails its warm-up: nothing is chosen (the cuBLASLt caller then throws, naming
// the last failure) and nothing is prepared or timed.
TEST(CandidateTuner, AllFailAtWarmUp) {
  FakeMatmul fake({{1.0}, {1.0}});
  fake.fails_at_warm_up = {0, 1};
  const Tuning r = time_candidates(2, 1, fake);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failed, 2u);
  EXPECT_EQ(r.median_ms, (std::vector<double>{-1.0, -1.0}));
  EXPECT_EQ(fake.log, (std::vector<std::string>{"w0", "w1"}));
}

// Every candidate fails in the timed rounds: nothing is chosen either.
TEST(CandidateTuner, AllFailInTimedRounds) {
  FakeMatmul fake({{1.0, 1.0}, {1.0, 1.0}});
  fake.fails_at_round = {{0, 0}, {1, 1}};
  const Tuning r = time_candidates(2, 2, fake);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.failed, 2u);
  EXPECT_EQ(r.median_ms, (std::vector<double>{-1.0, -1.0}));
  EXPECT_EQ(timed_order(fake.log), (std::vector<std::string>{"t0:0", "t1:1", "t3:1"}));
}

}  // namespace
}  // namespace cgemm::detail
