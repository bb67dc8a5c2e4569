#include "cgemm/runtime/schedule.hpp"

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {
int wrap(int x, int tp) { return ((x % tp) + tp) % tp; }

void check_rank(int tp, int me) {
  if (tp < 1 || me < 0 || me >= tp) {
    throw Error("schedule: rank " + std::to_string(me) + " is not in a group of " +
                std::to_string(tp));
  }
}
}  // namespace

std::vector<AllGatherStep> all_gather_schedule(int tp, int me, bool aggregate) {
  check_rank(tp, me);
  // Chunks from the left travel rightwards (forward), from the right leftwards (backward).
  // With tp = 2 the single other chunk goes forward only.
  const int forward = aggregate ? tp / 2 : tp - 1;
  const int backward = aggregate ? (tp - 1) / 2 : 0;
  const int steps = (forward > backward ? forward : backward) + 1;
  std::vector<AllGatherStep> out(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) {
    AllGatherStep& step = out[static_cast<size_t>(i)];
    if (i == 0) {
      step.compute.push_back(me);
    } else {
      if (i <= forward) step.compute.push_back(wrap(me - i, tp));
      if (i <= backward) step.compute.push_back(wrap(me + i, tp));
    }
    // At step i a rank forwards the chunk it computes (arrived at step i-1, or its own).
    if (i < forward) {
      step.transfers.push_back(
          {wrap(me + 1, tp), wrap(me - i, tp), wrap(me - 1, tp), wrap(me - i - 1, tp)});
    }
    if (i < backward) {
      step.transfers.push_back(
          {wrap(me - 1, tp), wrap(me + i, tp), wrap(me + 1, tp), wrap(me + i + 1, tp)});
    }
  }
  return out;
}

std::vector<ReduceScatterStep> reduce_scatter_schedule(int tp, int me) {
  check_rank(tp, me);
  std::vector<ReduceScatterStep> out(static_cast<size_t>(tp));
  for (int s = 0; s < tp; ++s) {
    const int dest = wrap(me + 1 + s, tp);
    out[static_cast<size_t>(s)] = {dest, dest == me ? -1 : wrap(me - 1 - s, tp)};
  }
  return out;
}

}  // namespace cgemm
