#pragma once
// Timelines of overlapped collective GEMMs: every rank's spans gathered to rank 0 and
// written as Chrome trace-event JSON (opens in Perfetto / chrome://tracing) and as a
// self-contained SVG with one lane per rank and stream, so a reader sees at a glance
// whether the transfers hide under the GEMMs.
//
// The traced calls (the GEMMs of a block) follow one another on the timeline, each as a span of
// category "call" (lane -1) that covers it on every rank, and each span carries its call's name
// in TraceSpan::group: the Chrome trace puts the calls on a track of their own ("GEMM calls")
// and names the call in every event's args, the SVG draws a labelled band per call.

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
/// timelines line up; returns this rank's spans (times from the call's start), the last one a
/// "call" span from 0 to the end of the last rank's last span (the same on every rank).
std::vector<TraceSpan> trace_call(Backend& be, MPI_Comm comm, const std::function<void()>& body);

/// Lays `spans` after those already in `timeline` (GEMMs one after another on the timeline) as
/// the call `group` ("call N", N counting from 1, when empty): sets every span's group, names
/// the call span (adding one over the spans when there is none) and gives it the call's FLOPs
/// and the bytes its transfers and collectives moved.
void append_after(std::vector<TraceSpan>& timeline, std::vector<TraceSpan> spans,
                  const std::string& group = {});

/// Collective over `comm`: gathers every rank's timeline on rank 0, which writes the Chrome
/// trace to `path` and the SVG to `path`.svg (each written whole, then renamed into place).
/// Returns rank 0's error text, empty on success and on the other ranks.
std::string write_trace(const std::string& path, const std::vector<TraceSpan>& mine,
                        int transport_lane, const std::string& title, MPI_Comm comm);

/// `transport_lane` is the lane number of the transport (= the number of compute streams).
/// Both throw cgemm::Error when the file cannot be written. Every event of the Chrome trace has
/// args "bytes" and "flops" (TraceSpan says what they count) and, in a call, "gemm": its name.
void write_chrome_trace(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane);
void write_svg_timeline(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane, const std::string& title);

/// A lane's name in both outputs: "stream N", "transport", or "GEMM calls" (lane -1).
std::string trace_lane_name(int lane, int transport_lane);

/// The text a bar `width_px` wide shows for span `name` of call `group` (whose band names the
/// call): the first of the name without the call's name, without its kind ("gemm "),
/// abbreviated ("step 0: chunk 1 piece 0 -> rank 1" to "s0 c1 p0→r1") and without the step,
/// that fits; else the last cut short with "…" when two characters fit; else "".
std::string fit_label(const std::string& name, const std::string& group, double width_px);

}  // namespace cgemm::launcher
