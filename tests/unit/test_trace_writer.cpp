// launcher/common/trace_writer and trace_svg on synthetic spans: the calls laid one after another
// and named, bytes and FLOPs in every Chrome event's args, and the SVG's call bands, bar labels
// (shortened to fit) and the hatching of waits.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "common/trace_writer.hpp"

namespace cgemm::launcher {
namespace {

namespace fs = std::filesystem;

std::string read(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("cgemm_trace_writer_" + name)).string();
}

// One rank's timeline of two calls of two streams and a transport (lane 2), as the launcher
// lays them: a GEMM chunk and a transfer, then a wait for it and a second chunk.
std::vector<TraceSpan> timeline(double scale) {
  std::vector<TraceSpan> t;
  for (const char* gemm : {"up_proj", "down_proj"}) {
    const std::string g = gemm;
    append_after(t,
                 {{g + " gemm chunk 0", "gemm", 0, 0.0, 1.0 * scale, 300, 2 * 64 * 32 * 16},
                  {g + " step 0: chunk 0 -> rank 1", "transfer", 2, 0.0, 1.5 * scale, 1024, 0},
                  {"wait for " + g + " step 0: chunk 0 -> rank 1", "wait", 1, 1.0 * scale,
                   1.5 * scale, 0, 0},
                  {g + " gemm chunk 1", "gemm", 1, 1.5 * scale, 2.5 * scale, 300, 2 * 64 * 32 * 16},
                  {"call", "call", -1, 0.0, 3.0 * scale, 0, 0}},
                 g);
  }
  return t;
}

TEST(TraceWriter, AppendAfterLaysCallsOneAfterAnotherAndNamesThem) {
  const std::vector<TraceSpan> t = timeline(1.0);
  std::vector<const TraceSpan*> calls;
  for (const TraceSpan& s : t) {
    if (s.category == "call") calls.push_back(&s);
  }
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]->name, "up_proj");
  EXPECT_EQ(calls[1]->name, "down_proj");
  EXPECT_EQ(calls[0]->flops, 2 * 2 * 64 * 32 * 16);  // its GEMMs'
  EXPECT_EQ(calls[0]->bytes, 1024);                  // its transfers'
  EXPECT_GT(calls[1]->start_ms, calls[0]->end_ms);
  for (const TraceSpan& s : t) {
    const TraceSpan& call = *calls[s.name.find("down_proj") != std::string::npos ? 1 : 0];
    EXPECT_EQ(s.group, call.name) << s.name;
    EXPECT_GE(s.start_ms, call.start_ms) << s.name;
    EXPECT_LE(s.end_ms, call.end_ms) << s.name;
  }
  // Without a name, a call is numbered; without a call span, one is added over the spans.
  std::vector<TraceSpan> u = t;
  append_after(u, {{"x", "gemm", 0, 0.0, 2.0, 1, 8}});
  EXPECT_EQ(u.back().category, "call");
  EXPECT_EQ(u.back().name, "call 3");
  EXPECT_EQ(u.back().flops, 8);
  EXPECT_DOUBLE_EQ(u.back().end_ms - u.back().start_ms, 2.0);
}

TEST(TraceWriter, ChromeEventsCarryBytesFlopsAndTheirGemm) {
  const std::string path = temp_path("chrome.json");
  write_chrome_trace(path, {{0, timeline(1.0)}, {1, timeline(1.0)}}, 2);
  const auto doc = nlohmann::json::parse(read(path));
  fs::remove(path);
  int xs = 0, calls = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == 3) {
      EXPECT_EQ(e["args"]["name"], "GEMM calls");
    }
    if (e["ph"] != "X") continue;
    ++xs;
    ASSERT_TRUE(e["args"].contains("bytes")) << e.dump();
    ASSERT_TRUE(e["args"].contains("flops")) << e.dump();
    ASSERT_TRUE(e["args"].contains("gemm")) << e.dump();
    if (e["cat"] == "gemm") {
      EXPECT_EQ(e["args"]["flops"], 2 * 64 * 32 * 16);
      EXPECT_EQ(e["args"]["bytes"], 300);
    }
    if (e["cat"] == "transfer") {
      EXPECT_EQ(e["args"]["bytes"], 1024);
    }
    if (e["cat"] == "call") {
      ++calls;
      EXPECT_EQ(e["tid"], 3);  // the calls' own thread, after the transport's
      EXPECT_EQ(e["name"], e["args"]["gemm"]);
    }
  }
  EXPECT_EQ(xs, 2 * 2 * 5);
  EXPECT_EQ(calls, 4);
  EXPECT_TRUE(doc["otherData"].contains("bytes"));
}

TEST(TraceWriter, FitLabelShortensToTheWidth) {
  const std::string g = "up_proj";
  EXPECT_EQ(fit_label("up_proj gemm chunk 1 piece 0", g, 400), "gemm chunk 1 piece 0");
  EXPECT_EQ(fit_label("up_proj gemm chunk 1 piece 0", g, 95), "chunk 1 piece 0");
  EXPECT_EQ(fit_label("up_proj gemm chunk 1 piece 0", g, 40), "c1 p0");
  EXPECT_EQ(fit_label("up_proj gemm chunk 1 piece 0", g, 30), "c1p0");
  EXPECT_EQ(fit_label("up_proj step 2: chunk 1 piece 0 -> rank 3", g, 80), "s2 c1 p0\u2192r3");
  EXPECT_EQ(fit_label("wait for up_proj step 2: chunk 1 -> rank 3", g, 60), "c1\u2192r3");
  EXPECT_EQ(fit_label("down_proj gemm partial for rank 3", "down_proj", 40), "for r3");
  EXPECT_EQ(fit_label("sum 4 partial(s)", g, 40), "sum 4");
  EXPECT_EQ(fit_label("up_proj gemm chunk 12 piece 10", g, 26), "c1\u2026");
  EXPECT_EQ(fit_label("up_proj gemm chunk 1 piece 0", g, 15), "");
  EXPECT_EQ(fit_label("all_gather gemm chunk 0", "", 400), "all_gather gemm chunk 0");
}

TEST(TraceWriter, SvgLabelsCallsBarsAndHatchesWaits) {
  const std::string path = temp_path("timeline.svg");
  // 1000 x wider bars than the picture needs next to bars too narrow for any text.
  std::vector<TraceSpan> wide = timeline(1.0);
  wide.push_back({"up_proj gemm chunk 7", "gemm", 0, 0.0, 0.0001, 1, 1, "up_proj"});
  write_svg_timeline(path, {{0, wide}, {1, timeline(1.0)}}, 2, "title <&>");
  const std::string svg = read(path);
  fs::remove(path);
  std::smatch m;
  // A band per GEMM of the block, labelled.
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("<text class=\"call\"[^>]*>up_proj \\(")));
  EXPECT_TRUE(std::regex_search(svg, m, std::regex("<text class=\"call\"[^>]*>down_proj \\(")));
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the line between them
  // The bars' names as text, without the GEMM's name the band already gives.
  EXPECT_NE(svg.find(">gemm chunk 0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">step 0: chunk 0 -&gt; rank 1</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">gemm chunk 7</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">c7"), std::string::npos);
  // Waits hatched, and the part of the transfer they waited for hatched on the transport.
  EXPECT_NE(svg.find("fill=\"url(#waiting)\" stroke"), std::string::npos);
  EXPECT_NE(svg.find("<rect class=\"waited\""), std::string::npos);
  // Bytes and FLOPs in the hover titles; the title escaped; the lanes named.
  EXPECT_NE(svg.find("65.5 kFLOP"), std::string::npos);
  EXPECT_NE(svg.find("title &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(svg.find("rank 1 transport"), std::string::npos);
  EXPECT_EQ(svg.find("GEMM calls"), std::string::npos);  // the calls are bands, not a lane
}

}  // namespace
}  // namespace cgemm::launcher
