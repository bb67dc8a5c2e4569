#pragma once
// Picks the fastest of a GEMM's candidate algorithms from timed runs (docs/GEMM_TUNER.md).
// Knows nothing of CUDA: a CandidateRunner enqueues the runs and reports their times, so the
// policy (warm-up, interleaved rounds, median, ties, failures) is tested with a fake runner.

#include <cstddef>
#include <vector>

namespace cgemm::detail {

/// What the tuner needs from a GEMM library. The runs are enqueued one after the other and
/// their times read once at the end (a GPU times them with events without waiting per run),
/// hence separate calls for running and for reading the times.
class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  /// One untimed run of `candidate`; false when it failed (it is then left out).
  virtual bool warm_up(size_t candidate) = 0;
  /// Called once, after the warm-ups and only when a candidate survived them: timed runs
  /// numbered 0 .. runs - 1 follow.
  virtual void prepare(size_t runs) = 0;
  /// Timed run number `run` of `candidate`; false when it failed (the candidate is then left
  /// out and not run again). Not called for runs of a candidate that failed before.
  virtual bool timed_run(size_t run, size_t candidate) = 0;
  /// Milliseconds of every timed run by run number (waits for them); the values of runs that
  /// failed or were not made are not read.
  virtual std::vector<double> elapsed_ms() = 0;
};

struct Tuning {
  bool ok = false;                // false: every candidate failed, nothing was chosen
  size_t chosen = 0;              // the candidate with the lowest median (ties: lowest index)
  std::vector<double> median_ms;  // per candidate; -1 for one that failed
  size_t failed = 0;              // candidates left out because a run failed
};

/// Warm-up of every candidate, then `rounds` rounds that time every surviving candidate once
/// in turn (round-robin, so a drift of the clocks hits all alike); each candidate's median
/// (the upper one for an even count) decides. `candidates` >= 1, `rounds` >= 1.
Tuning time_candidates(size_t candidates, int rounds, CandidateRunner& runner);

}  // namespace cgemm::detail
