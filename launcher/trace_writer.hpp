#pragma once
// Timelines of overlapped collective GEMMs: every rank's spans gathered to rank 0 and
// written as Chrome trace-event JSON (opens in Perfetto / chrome://tracing) and as a
// self-contained SVG with one lane per rank and stream, so a reader sees at a glance
// whether the transfers hide under the GEMMs.

#include <mpi.h>

#include <functional>
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

/// One traced call of `body` on every rank of `comm`, started together so that the ranks'
/// timelines line up; returns this rank's spans (times from the call's start).
std::vector<TraceSpan> trace_call(Backend& be, MPI_Comm comm, const std::function<void()>& body);

/// Lays `spans` after those already in `timeline` (GEMMs one after another on the timeline).
void append_after(std::vector<TraceSpan>& timeline, std::vector<TraceSpan> spans);

/// Collective over `comm`: gathers every rank's timeline on rank 0, which writes the Chrome
/// trace to `path` and the SVG to `path`.svg (each written whole, then renamed into place).
/// Returns rank 0's error text, empty on success and on the other ranks.
std::string write_trace(const std::string& path, const std::vector<TraceSpan>& mine,
                        int transport_lane, const std::string& title, MPI_Comm comm);

/// `transport_lane` is the lane number of the transport (= the number of compute streams).
/// Both throw cgemm::Error when the file cannot be written.
void write_chrome_trace(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane);
void write_svg_timeline(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane, const std::string& title);

}  // namespace cgemm::launcher
