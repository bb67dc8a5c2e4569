#include "candidate_tuner.hpp"

#include <algorithm>

namespace cgemm::detail {

Tuning time_candidates(size_t candidates, int rounds, CandidateRunner& runner) {
  Tuning result;
  result.median_ms.assign(candidates, -1.0);
  std::vector<size_t> live;
  for (size_t i = 0; i < candidates; ++i) {
    if (runner.warm_up(i)) live.push_back(i);
  }
  result.failed = candidates - live.size();
  if (live.empty()) return result;

  // Run r times live[r % live.size()]: the candidates take turns, round after round.
  const size_t runs = live.size() * static_cast<size_t>(rounds);
  runner.prepare(runs);
  std::vector<bool> failed(candidates, false);
  for (size_t run = 0; run < runs; ++run) {
    const size_t i = live[run % live.size()];
    if (!failed[i] && !runner.timed_run(run, i)) failed[i] = true;
  }
  const std::vector<double> times = runner.elapsed_ms();
  std::vector<std::vector<double>> ms(candidates);
  for (size_t run = 0; run < runs; ++run) {
    const size_t i = live[run % live.size()];
    if (!failed[i]) ms[i].push_back(times[run]);
  }
  std::erase_if(live, [&](size_t i) { return failed[i]; });
  result.failed = candidates - live.size();
  if (live.empty()) return result;

  bool any = false;
  for (size_t i : live) {
    std::sort(ms[i].begin(), ms[i].end());
    result.median_ms[i] = ms[i][ms[i].size() / 2];
    // Strictly faster only: on a tie the earlier candidate (the heuristic's order) stays.
    if (!any || result.median_ms[i] < result.median_ms[result.chosen]) {
      result.chosen = i;
      any = true;
    }
  }
  result.ok = true;
  return result;
}

}  // namespace cgemm::detail
