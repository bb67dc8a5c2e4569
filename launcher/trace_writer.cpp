#include "trace_writer.hpp"

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/watchdog.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "output_files.hpp"

namespace cgemm::launcher {

namespace {

std::string lane_name(int lane, int transport_lane) {
  return lane == transport_lane ? "transport" : "stream " + std::to_string(lane);
}

const char* colour(const std::string& category) {
  if (category == "gemm") return "#4878cf";
  if (category == "transfer") return "#e8873a";
  if (category == "reorder") return "#6aa84f";
  if (category == "reduce") return "#8e63b5";
  return "#999999";  // collective and anything else
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  write_replacing("trace", path, text);
}

}  // namespace

std::vector<RankTrace> gather_traces(const std::vector<TraceSpan>& mine, MPI_Comm comm) {
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  nlohmann::json j = nlohmann::json::array();
  for (const TraceSpan& s : mine) j.push_back({s.name, s.category, s.lane, s.start_ms, s.end_ms});
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
                         e[3].get<double>(), e[4].get<double>()});
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
  return spans;
}

void append_after(std::vector<TraceSpan>& timeline, std::vector<TraceSpan> spans) {
  double shift = 0.0;
  for (const TraceSpan& s : timeline) shift = std::max(shift, s.end_ms + 0.05);
  for (TraceSpan& s : spans) {
    s.start_ms += shift;
    s.end_ms += shift;
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
  // is the process, the lane the thread.
  nlohmann::json events = nlohmann::json::array();
  for (const RankTrace& t : traces) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", t.rank},
                      {"args", {{"name", "rank " + std::to_string(t.rank)}}}});
    std::set<int> lanes;
    for (const TraceSpan& s : t.spans) lanes.insert(s.lane);
    for (int lane : lanes) {
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", t.rank},
                        {"tid", lane},
                        {"args", {{"name", lane_name(lane, transport_lane)}}}});
    }
    for (const TraceSpan& s : t.spans) {
      events.push_back({{"ph", "X"},
                        {"name", s.name},
                        {"cat", s.category},
                        {"pid", t.rank},
                        {"tid", s.lane},
                        {"ts", s.start_ms * 1000.0},
                        {"dur", std::max(0.0, s.end_ms - s.start_ms) * 1000.0}});
    }
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  write_file(path, doc.dump(1) + "\n");
}

void write_svg_timeline(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane, const std::string& title) {
  double t_end = 0.0;
  std::vector<std::pair<int, int>> rows;  // (rank, lane), in display order
  for (const RankTrace& t : traces) {
    std::set<int> lanes;
    for (const TraceSpan& s : t.spans) {
      lanes.insert(s.lane);
      t_end = std::max(t_end, s.end_ms);
    }
    for (int lane : lanes) rows.push_back({t.rank, lane});
  }
  if (t_end <= 0.0) t_end = 1.0;
  const int label_w = 130, plot_w = 1100, row_h = 22, top = 48, legend_h = 40;
  const int height = top + static_cast<int>(rows.size()) * row_h + legend_h;
  const int width = label_w + plot_w + 20;
  const auto x_of = [&](double ms) { return label_w + ms / t_end * plot_w; };
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"8\" y=\"18\" font-size=\"14\">" << escape_xml(title) << "</text>\n";
  // Time axis: about ten ticks at a round step.
  double step = 1e-3;
  while (t_end / step > 10) step *= (std::to_string(step).find('2') != std::string::npos) ? 2.5 : 2;
  for (double t = 0.0; t <= t_end + 1e-12; t += step) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g ms", t);
    svg << "<line x1=\"" << x_of(t) << "\" y1=\"" << top - 6 << "\" x2=\"" << x_of(t) << "\" y2=\""
        << top + rows.size() * row_h << "\" stroke=\"#ddd\"/>\n"
        << "<text x=\"" << x_of(t) << "\" y=\"" << top - 10 << "\" text-anchor=\"middle\">" << buf
        << "</text>\n";
  }
  std::map<std::pair<int, int>, int> row_of;
  for (size_t i = 0; i < rows.size(); ++i) {
    row_of[rows[i]] = static_cast<int>(i);
    const int y = top + static_cast<int>(i) * row_h;
    svg << "<text x=\"8\" y=\"" << y + 15 << "\">rank " << rows[i].first << " "
        << lane_name(rows[i].second, transport_lane) << "</text>\n";
  }
  for (const RankTrace& t : traces) {
    for (const TraceSpan& s : t.spans) {
      const int y = top + row_of[{t.rank, s.lane}] * row_h + 3;
      const double x = x_of(s.start_ms), w = std::max(0.5, x_of(s.end_ms) - x);
      char buf[64];
      std::snprintf(buf, sizeof(buf), " (%.3f ms)", s.end_ms - s.start_ms);
      svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\""
          << row_h - 6 << "\" fill=\"" << colour(s.category)
          << "\" stroke=\"white\" stroke-width=\"0.5\"><title>" << escape_xml(s.name) << buf
          << "</title></rect>\n";
    }
  }
  int lx = label_w;
  const int ly = top + static_cast<int>(rows.size()) * row_h + 20;
  for (const char* c : {"gemm", "transfer", "reorder", "reduce", "collective"}) {
    svg << "<rect x=\"" << lx << "\" y=\"" << ly - 10 << "\" width=\"12\" height=\"12\" fill=\""
        << colour(c) << "\"/><text x=\"" << lx + 16 << "\" y=\"" << ly << "\">" << c << "</text>\n";
    lx += 100;
  }
  svg << "</svg>\n";
  write_file(path, svg.str());
}

}  // namespace cgemm::launcher
