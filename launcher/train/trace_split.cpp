// split_calls (trace_split.hpp): interval unions over the spans of each call.

#include "trace_split.hpp"

#include <algorithm>
#include <utility>

namespace cgemm::launcher {
namespace {

using Intervals = std::vector<std::pair<double, double>>;

// Sorted, disjoint.
Intervals merged(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (const auto& [a, b] : v) {
    if (!out.empty() && a <= out.back().second) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  return out;
}

double length(const Intervals& v) {
  double t = 0.0;
  for (const auto& [a, b] : v) t += b - a;
  return t;
}

// Both sorted and disjoint.
double overlap(const Intervals& x, const Intervals& y) {
  double t = 0.0;
  size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    const double a = std::max(x[i].first, y[j].first);
    const double b = std::min(x[i].second, y[j].second);
    if (b > a) t += b - a;
    (x[i].second < y[j].second) ? ++i : ++j;
  }
  return t;
}

}  // namespace

std::vector<CallSplit> split_calls(const std::vector<TraceSpan>& timeline) {
  std::vector<CallSplit> out;
  for (const TraceSpan& call : timeline) {
    if (call.category != "call") continue;
    Intervals gemm, comm, fsdp;
    for (const TraceSpan& s : timeline) {
      if (s.group != call.group || s.end_ms <= s.start_ms) continue;
      if (s.category == "gemm") gemm.emplace_back(s.start_ms, s.end_ms);
      if (s.category == "transfer" || s.category == "collective") {
        comm.emplace_back(s.start_ms, s.end_ms);
        // Over fsdp: the spans whose labels name it (the weight's exchange steps and
        // all-gathers, the gradient's reduce-scatter and all-reduces), less the rows layout's
        // local copy of this rank's own shard into the ring.
        if (s.name.find("fsdp") != std::string::npos &&
            s.name.find("own rhs shard") == std::string::npos) {
          fsdp.emplace_back(s.start_ms, s.end_ms);
        }
      }
    }
    gemm = merged(std::move(gemm));
    comm = merged(std::move(comm));
    fsdp = merged(std::move(fsdp));
    out.push_back({call.group, call.end_ms - call.start_ms, length(gemm), length(comm),
                   overlap(gemm, comm), length(fsdp), overlap(gemm, fsdp)});
  }
  return out;
}

}  // namespace cgemm::launcher
