// GemmPlan's calls: each runs one of its collective GEMM's programs on the engine. The path
// choice of the overlap policy lives here; what the paths do lives in runtime/src/collectives/.

#include <algorithm>
#include <cstdio>
#include <vector>

#include "plan_impl.hpp"

namespace cgemm {

void GemmPlan::execute_overlapped(const void* lhs, const void* rhs, const void* bias, void* out) {
  if (impl_->geometry.has_bias && bias == nullptr) {
    throw Error("GEMM '" + desc_.name + "' was planned with a bias but got none");
  }
  impl_->engine.run(impl_->kind.overlapped, {lhs, rhs, bias, out});
}

void GemmPlan::execute_sequential(const void* lhs, const void* rhs, const void* bias, void* out) {
  if (impl_->geometry.has_bias && bias == nullptr) {
    throw Error("GEMM '" + desc_.name + "' was planned with a bias but got none");
  }
  impl_->engine.run(impl_->kind.sequential, {lhs, rhs, bias, out});
}

void GemmPlan::execute(const void* lhs, const void* rhs, const void* bias, void* out) {
  Impl& p = *impl_;
  if (p.kind.overlappable && p.policy == OverlapPolicy::kAuto && !p.path_decided) {
    decide_path(lhs, rhs, bias, out);
  }
  if (p.use_overlap) {
    execute_overlapped(lhs, rhs, bias, out);
  } else {
    execute_sequential(lhs, rhs, bias, out);
  }
}

void GemmPlan::decide_path(const void* lhs, const void* rhs, const void* bias, void* out) {
  // Both paths write the same result, so timing them on the caller's buffers is harmless;
  // the call that follows writes the final output. Medians of a few runs, the slowest rank
  // of the TP group deciding for all (the two paths run different collectives).
  Impl& p = *impl_;
  Backend& be = p.engine.backend();
  constexpr int kRuns = 5;
  std::vector<double> over, seq;
  for (int i = 0; i < kRuns + 1; ++i) {
    const double a = be.time_ms([&] { execute_overlapped(lhs, rhs, bias, out); });
    const double b = be.time_ms([&] { execute_sequential(lhs, rhs, bias, out); });
    if (i == 0) continue;  // warm-up: first use allocates and tunes
    over.push_back(a);
    seq.push_back(b);
  }
  std::sort(over.begin(), over.end());
  std::sort(seq.begin(), seq.end());
  double t[2] = {over[kRuns / 2], seq[kRuns / 2]};
  ctx_.comms().max_over_tp(t, 2);
  p.auto_overlapped_ms = t[0];
  p.auto_sequential_ms = t[1];
  p.use_overlap = t[0] <= t[1];
  p.path_decided = true;
  // The path not taken keeps no workspace of its own.
  p.engine.trim(p.use_overlap ? p.kind.overlapped.workspace : p.kind.sequential.workspace);
}

std::string GemmPlan::path_summary() const {
  const Impl& p = *impl_;
  if (!p.kind.overlappable) return "plain GEMM (no collective to overlap)";
  if (p.policy == OverlapPolicy::kAlways) return "overlapped (overlap = on)";
  if (p.policy == OverlapPolicy::kNever) return "sequential (overlap = off)";
  if (!p.path_decided) return "auto (decided on the first call)";
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s (auto: overlapped %.3f ms vs sequential %.3f ms)",
                p.use_overlap ? "overlapped" : "sequential", p.auto_overlapped_ms,
                p.auto_sequential_ms);
  return buf;
}

bool GemmPlan::uses_overlap() const { return impl_->use_overlap; }

void GemmPlan::bench_gemm_only(const void* lhs, const void* rhs, void* out) {
  impl_->engine.run(impl_->kind.gemm_only, {lhs, rhs, nullptr, out});
}

void GemmPlan::bench_collective_only(const void* lhs, void* out) {
  impl_->engine.run(impl_->kind.collective_only, {lhs, nullptr, nullptr, out});
}

}  // namespace cgemm
