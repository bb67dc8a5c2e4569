#include "trace_writer.hpp"

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/watchdog.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "output_files.hpp"

namespace cgemm::launcher {

namespace {

// The Chrome trace's thread of the calls (lane -1): after the transport's, listed first.
int chrome_tid(int lane, int transport_lane) { return lane < 0 ? transport_lane + 1 : lane; }

}  // namespace

std::string trace_lane_name(int lane, int transport_lane) {
  if (lane < 0) return "GEMM calls";
  return lane == transport_lane ? "transport" : "stream " + std::to_string(lane);
}

std::vector<RankTrace> gather_traces(const std::vector<TraceSpan>& mine, MPI_Comm comm) {
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  nlohmann::json j = nlohmann::json::array();
  for (const TraceSpan& s : mine) {
    j.push_back({s.name, s.category, s.lane, s.start_ms, s.end_ms, s.bytes, s.flops, s.group});
  }
  const std::string text = j.dump();
  int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  check_mpi(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm),
            "MPI_Gather(trace lengths)");
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += lens[static_cast<size_t>(r)];
    }
    all.resize(static_cast<size_t>(total));
  }
  check_mpi(MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                        MPI_CHAR, 0, comm),
            "MPI_Gatherv(traces)");
  std::vector<RankTrace> out;
  if (rank != 0) return out;
  for (int r = 0; r < size; ++r) {
    RankTrace t{r, {}};
    const auto arr =
        nlohmann::json::parse(all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                                         static_cast<size_t>(lens[static_cast<size_t>(r)])));
    for (const auto& e : arr) {
      t.spans.push_back({e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<int>(),
                         e[3].get<double>(), e[4].get<double>(), e[5].get<int64_t>(),
                         e[6].get<int64_t>(), e[7].get<std::string>()});
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<TraceSpan> trace_call(Backend& be, MPI_Comm comm, const std::function<void()>& body) {
  be.synchronize();
  {
    const watchdog::WaitScope wait("the barrier before a traced call");
    check_mpi(MPI_Barrier(comm), "MPI_Barrier(traced call)");
  }
  be.set_tracing(true);
  body();
  std::vector<TraceSpan> spans = be.take_trace();
  be.set_tracing(false);
  // The call ends with the last rank's last span: every rank's call span is the same, so the
  // next call starts at the same time on every rank's timeline.
  double end = 0.0;
  for (const TraceSpan& s : spans) end = std::max(end, s.end_ms);
  {
    const watchdog::WaitScope wait("the end of a traced call");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &end, 1, MPI_DOUBLE, MPI_MAX, comm),
              "MPI_Allreduce(traced call's end)");
  }
  spans.push_back({"call", "call", -1, 0.0, end, 0, 0});
  return spans;
}

void append_after(std::vector<TraceSpan>& timeline, std::vector<TraceSpan> spans,
                  const std::string& group) {
  double shift = 0.0;
  int calls = 0;
  for (const TraceSpan& s : timeline) {
    shift = std::max(shift, s.end_ms + 0.05);
    calls += s.category == "call" ? 1 : 0;
  }
  const std::string name = group.empty() ? "call " + std::to_string(calls + 1) : group;
  TraceSpan* call = nullptr;
  int64_t flops = 0, bytes = 0;
  double end = 0.0;
  for (TraceSpan& s : spans) {
    if (s.category == "call") call = &s;
    flops += s.category == "gemm" ? s.flops : 0;
    bytes += s.category == "transfer" || s.category == "collective" ? s.bytes : 0;
    end = std::max(end, s.end_ms);
  }
  if (call == nullptr) {
    spans.push_back({name, "call", -1, 0.0, end, 0, 0});
    call = &spans.back();
  }
  call->name = name;
  call->flops = flops;
  call->bytes = bytes;
  for (TraceSpan& s : spans) {
    s.start_ms += shift;
    s.end_ms += shift;
    s.group = name;
    timeline.push_back(std::move(s));
  }
}

std::string write_trace(const std::string& path, const std::vector<TraceSpan>& mine,
                        int transport_lane, const std::string& title, MPI_Comm comm) {
  const auto traces = gather_traces(mine, comm);
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  if (rank != 0) return {};
  try {
    write_chrome_trace(path, traces, transport_lane);
    write_svg_timeline(path + ".svg", traces, transport_lane, title);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

void write_chrome_trace(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane) {
  // Trace-event format: one "complete" (X) event per span, times in microseconds; the rank
  // is the process, the lane the thread, the calls a thread listed first.
  nlohmann::json events = nlohmann::json::array();
  for (const RankTrace& t : traces) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", t.rank},
                      {"args", {{"name", "rank " + std::to_string(t.rank)}}}});
    std::set<int> lanes;
    for (const TraceSpan& s : t.spans) lanes.insert(s.lane);
    for (int lane : lanes) {
      const int tid = chrome_tid(lane, transport_lane);
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", t.rank},
                        {"tid", tid},
                        {"args", {{"name", trace_lane_name(lane, transport_lane)}}}});
      events.push_back({{"ph", "M"},
                        {"name", "thread_sort_index"},
                        {"pid", t.rank},
                        {"tid", tid},
                        {"args", {{"sort_index", lane}}}});
    }
    for (const TraceSpan& s : t.spans) {
      nlohmann::json args = {{"bytes", s.bytes}, {"flops", s.flops}};
      if (!s.group.empty()) args["gemm"] = s.group;
      events.push_back({{"ph", "X"},
                        {"name", s.name},
                        {"cat", s.category},
                        {"pid", t.rank},
                        {"tid", chrome_tid(s.lane, transport_lane)},
                        {"ts", s.start_ms * 1000.0},
                        {"dur", std::max(0.0, s.end_ms - s.start_ms) * 1000.0},
                        {"args", std::move(args)}});
    }
  }
  const nlohmann::json other = {
      {"bytes",
       "transfer: sent by this rank (it receives as many); copy: copied; collective: the "
       "collective's size as nccl-tests counts it; gemm, reorder, reduce: memory read and "
       "written; wait: 0"},
      {"flops", "gemm: 2*m*n*k*batch; call: the sum of its GEMMs'; others: 0"},
      {"transfer",
       "cpu backend: from posting the MPI requests to the wait that saw them complete; cuda "
       "backend: the exchange on the communication stream (including any wait for the peer)"},
      {"wait", "the time a compute stream stood still until an exchange completed"},
      {"call", "a traced call (a GEMM of the block) on every rank, on the 'GEMM calls' thread"}};
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  write_replacing("trace", path, doc.dump(1) + "\n");
}

}  // namespace cgemm::launcher
