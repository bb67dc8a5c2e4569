#pragma once
// Timelines of overlapped collective GEMMs: every rank's spans gathered to rank 0 and
// written as Chrome trace-event JSON (opens in Perfetto / chrome://tracing) and as a
// self-contained SVG with one lane per rank and stream, so a reader sees at a glance
// whether the transfers hide under the GEMMs.

#include <mpi.h>

#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"

namespace cgemm::launcher {

struct RankTrace {
  int rank = 0;
  std::vector<TraceSpan> spans;
};

/// Collective over `comm`: rank 0 gets every rank's spans (in rank order); others get {}.
std::vector<RankTrace> gather_traces(const std::vector<TraceSpan>& mine, MPI_Comm comm);

/// `transport_lane` is the lane number of the transport (= the number of compute streams).
/// Both throw cgemm::Error when the file cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane);
void write_svg_timeline(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane, const std::string& title);

}  // namespace cgemm::launcher
