#pragma once
// Where a traced call's time went: the GEMMs' busy time, the communication's (transfers and
// collectives) and how much of the communication ran while a GEMM did, from the spans of one
// rank's timeline (trace_writer.hpp). The share of a step in "each GEMM and collective" when the
// two overlap: their busy times are not additive, their union is.

#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"

namespace cgemm::launcher {

struct CallSplit {
  std::string call;        // TraceSpan::group
  double wall_ms = 0.0;    // the call span's length (the slowest rank's end)
  double gemm_ms = 0.0;    // union of the "gemm" spans, all streams
  double comm_ms = 0.0;    // union of the "transfer" and "collective" spans
  double hidden_ms = 0.0;  // of comm_ms, the time some GEMM ran too
  // The same two for the spans over the fsdp group (their labels name it: the weight's gather
  // and the gradient's reduce-scatter and all-reduce; not a local copy of this rank's own
  // shard), a part of comm_ms and hidden_ms.
  double fsdp_ms = 0.0;
  double fsdp_hidden_ms = 0.0;
};

/// One CallSplit per call span of `timeline`, in timeline order. Spans of other categories are
/// ignored; the unions merge overlapping spans of every lane.
std::vector<CallSplit> split_calls(const std::vector<TraceSpan>& timeline);

}  // namespace cgemm::launcher
