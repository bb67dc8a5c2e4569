// The SVG timeline of a trace (see trace_writer.hpp): a labelled band per traced call (the
// GEMMs of the block) over one lane per rank and stream, every bar named in text as far as
// its width allows, waits hatched, and on the transport lanes the part of each exchange that a
// stream waited for hatched over it.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "output_files.hpp"
#include "trace_writer.hpp"

namespace cgemm::launcher {

namespace {

// The bars' text: 9 px sans-serif, whose widest usual glyphs (digits, lower case) stay under
// this width, plus a margin either side.
constexpr double kCharPx = 5.6;
constexpr double kPadPx = 2.0;

const char* colour(const std::string& category) {
  if (category == "gemm") return "#4878cf";
  if (category == "transfer") return "#e8873a";
  if (category == "wait") return "url(#waiting)";
  if (category == "reorder") return "#6aa84f";
  if (category == "reduce") return "#8e63b5";
  return "#999999";  // collective and anything else
}

// Dark text on the light fills, white on the dark ones.
const char* text_colour(const std::string& category) {
  return category == "transfer" || category == "wait" || category == "collective" ? "#222"
                                                                                  : "white";
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

// Characters (UTF-8 code points) of `s`, and its first `n` of them.
size_t glyphs(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}
std::string first_glyphs(const std::string& s, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == n) break;
  }
  return s.substr(0, i);
}

bool fits(const std::string& s, double width_px) {
  return static_cast<double>(glyphs(s)) * kCharPx + 2 * kPadPx <= width_px;
}

std::string replace_all(std::string s, const char* pattern, const char* by) {
  return std::regex_replace(s, std::regex(pattern), by);
}

// `s` without its space-separated words that match `word`.
std::string without_words(const std::string& s, const std::regex& word) {
  std::istringstream in(s);
  std::string w, out;
  while (in >> w) {
    if (!std::regex_match(w, word)) out += (out.empty() ? "" : " ") + w;
  }
  return out;
}

// "1.23 M" style: three significant digits and an SI prefix.
std::string si(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  size_t p = 0;
  while (std::fabs(v) >= 1000.0 && p + 1 < std::size(prefixes)) {
    v /= 1000.0;
    ++p;
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.3g %s%s", v, prefixes[p], unit);
  return buf;
}

// A bar's hover text: its name, duration, and what it moved and computed at what rate.
std::string hover(const TraceSpan& s) {
  const double ms = s.end_ms - s.start_ms;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", ms);
  std::string t = s.name + " (" + buf;
  if (s.flops > 0) {
    t += ", " + si(static_cast<double>(s.flops), "FLOP");
    if (ms > 0) t += ", " + si(static_cast<double>(s.flops) / ms * 1e3, "FLOP/s");
  }
  if (s.bytes > 0) {
    t += ", " + si(static_cast<double>(s.bytes), "B");
    if (ms > 0 && s.category != "call")
      t += ", " + si(static_cast<double>(s.bytes) / ms * 1e3, "B/s");
  }
  return t + ")";
}

// A traced call on the common time axis: from its first rank's start to its last rank's end.
struct Call {
  std::string name;
  double start_ms = 0.0, end_ms = 0.0;
  int64_t flops = 0, bytes = 0;  // rank 0's
};

// The calls in timeline order: their "call" spans' extent over all ranks where they have them,
// else their spans'.
std::vector<Call> calls_of(const std::vector<RankTrace>& traces) {
  std::map<std::string, Call> from_calls, from_spans;
  const auto widen = [](std::map<std::string, Call>& calls, const TraceSpan& s) -> Call& {
    Call& c = calls.try_emplace(s.group, Call{s.group, s.start_ms, s.end_ms}).first->second;
    c.start_ms = std::min(c.start_ms, s.start_ms);
    c.end_ms = std::max(c.end_ms, s.end_ms);
    return c;
  };
  for (const RankTrace& t : traces) {
    for (const TraceSpan& s : t.spans) {
      if (s.group.empty()) continue;
      if (s.category != "call") {
        widen(from_spans, s);
        continue;
      }
      Call& c = widen(from_calls, s);
      if (&t == &traces.front()) {
        c.flops = s.flops;
        c.bytes = s.bytes;
      }
    }
  }
  for (auto& [name, c] : from_spans) from_calls.try_emplace(name, c);
  std::vector<Call> out;
  for (auto& [name, c] : from_calls) out.push_back(std::move(c));
  std::sort(out.begin(), out.end(),
            [](const Call& a, const Call& b) { return a.start_ms < b.start_ms; });
  return out;
}

// Shared layout of the picture.
struct Layout {
  static constexpr int label_w = 130, plot_w = 1100, row_h = 22, bar_h = 16;
  static constexpr int band_y = 46, band_h = 20, lanes_top = band_y + band_h + 6;
  double t_end = 1.0;
  size_t rows = 0;
  double x(double ms) const { return label_w + ms / t_end * plot_w; }
  int lanes_bottom() const { return lanes_top + static_cast<int>(rows) * row_h; }
};

// The bar's name, as much as fits; dark text gets a light halo so that it reads over hatching.
void bar_text(std::ostringstream& svg, double x, double w, int y, const TraceSpan& s) {
  const std::string text = fit_label(s.name, s.group, w);
  if (text.empty()) return;
  const char* fill = text_colour(s.category);
  svg << "<text x=\"" << x + w / 2 << "\" y=\"" << y << "\" text-anchor=\"middle\" fill=\"" << fill
      << "\" font-size=\"9\" pointer-events=\"none\"";
  // On a transfer, hatched where a stream waited for it, a halo of the bar's own colour.
  if (s.category == "transfer" || s.category == "wait") {
    svg << " stroke=\"" << (s.category == "wait" ? "#fde8d4" : colour(s.category))
        << "\" stroke-width=\"3\" paint-order=\"stroke\"";
  }
  svg << ">" << escape_xml(text) << "</text>\n";
}

// Behind everything: a faint background per call over the lanes, alternating.
void draw_call_backgrounds(std::ostringstream& svg, const Layout& L,
                           const std::vector<Call>& calls) {
  for (size_t i = 0; i < calls.size(); ++i) {
    const double x0 = L.x(calls[i].start_ms), w = std::max(1.0, L.x(calls[i].end_ms) - x0);
    svg << "<rect x=\"" << x0 << "\" y=\"" << L.lanes_top << "\" width=\"" << w << "\" height=\""
        << L.lanes_bottom() - L.lanes_top << "\" fill=\"" << (i % 2 != 0 ? "#fbf6ee" : "#f2f5fb")
        << "\"/>\n";
  }
}

// Over the grid: a labelled band per call above the lanes and a dashed line where it starts.
void draw_call_bands(std::ostringstream& svg, const Layout& L, const std::vector<Call>& calls) {
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    const double x0 = L.x(c.start_ms), w = std::max(1.0, L.x(c.end_ms) - x0);
    const bool odd = i % 2 != 0;
    svg << "<line x1=\"" << x0 << "\" y1=\"" << L.band_y << "\" x2=\"" << x0 << "\" y2=\""
        << L.lanes_bottom() << "\" stroke=\"#556\" stroke-dasharray=\"4 3\"/>\n";
    TraceSpan as_span{c.name, "call", -1, c.start_ms, c.end_ms, c.bytes, c.flops};
    svg << "<rect class=\"call\" x=\"" << x0 << "\" y=\"" << L.band_y << "\" width=\"" << w
        << "\" height=\"" << L.band_h << "\" fill=\"" << (odd ? "#ead9bf" : "#c9d6ee")
        << "\" stroke=\"#556\" stroke-width=\"0.5\"><title>"
        << escape_xml(hover(as_span) + " per rank, on rank 0") << "</title></rect>\n";
    char ms[32];
    std::snprintf(ms, sizeof(ms), " (%.3g ms)", c.end_ms - c.start_ms);
    // The band's 11 px bold glyphs are about 1.35 times as wide as the bars' 9 px ones.
    const double room = w / 1.35;
    std::string text = c.name + ms;
    if (!fits(text, room)) text = fit_label(c.name, "", room);
    if (!text.empty()) {
      svg << "<text class=\"call\" x=\"" << x0 + w / 2 << "\" y=\"" << L.band_y + 14
          << "\" text-anchor=\"middle\" font-size=\"11\" font-weight=\"bold\" fill=\"#223\">"
          << escape_xml(text) << "</text>\n";
    }
  }
}

void draw_axis(std::ostringstream& svg, const Layout& L) {
  // About ten ticks at a round step.
  double step = 1e-3;
  while (L.t_end / step > 10) {
    step *= (std::to_string(step).find('2') != std::string::npos) ? 2.5 : 2;
  }
  for (double t = 0.0; t <= L.t_end + 1e-12; t += step) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.3g ms", t);
    svg << "<line x1=\"" << L.x(t) << "\" y1=\"" << L.band_y - 4 << "\" x2=\"" << L.x(t)
        << "\" y2=\"" << L.lanes_bottom() << "\" stroke=\"#ddd\"/>\n"
        << "<text x=\"" << L.x(t) << "\" y=\"" << L.band_y - 8 << "\" text-anchor=\"middle\">"
        << buf << "</text>\n";
  }
}

void draw_legend(std::ostringstream& svg, const Layout& L) {
  int lx = Layout::label_w;
  const int ly = L.lanes_bottom() + 20;
  const std::pair<const char*, const char*> items[] = {
      {"gemm", "gemm"},
      {"transfer", "transfer (exchange in flight)"},
      {"wait", "waiting for an exchange"},
      {"reorder", "reorder"},
      {"reduce", "reduce"},
      {"collective", "collective"}};
  for (const auto& [category, text] : items) {
    svg << "<rect x=\"" << lx << "\" y=\"" << ly - 10 << "\" width=\"12\" height=\"12\" fill=\""
        << colour(category) << "\"/><text x=\"" << lx + 16 << "\" y=\"" << ly << "\">" << text
        << "</text>\n";
    lx += static_cast<int>(std::string(text).size()) * 6 + 40;
  }
  svg << "<text x=\"" << Layout::label_w << "\" y=\"" << ly + 18
      << "\" fill=\"#555\">Bands: the traced GEMMs, one after another. Hatched on a stream: the "
         "stream stood still until an exchange completed; on a transport lane: the part of the "
         "exchange</text>\n"
      << "<text x=\"" << Layout::label_w << "\" y=\"" << ly + 32
      << "\" fill=\"#555\">that a stream waited for. Hover a bar for its name, time, bytes and "
         "FLOPs; the Chrome trace beside this file has them in each event's args.</text>\n";
}

}  // namespace

std::string fit_label(const std::string& name, const std::string& group, double width_px) {
  std::string s = name;
  if (const size_t at = group.empty() ? std::string::npos : s.find(group + " ");
      at != std::string::npos) {
    s.erase(at, group.size() + 1);
  }
  std::vector<std::string> forms{s};
  s = replace_all(s, "^gemm ", "");
  forms.push_back(s);
  s = replace_all(s, "wait for ", "wait ");
  s = replace_all(s, "step (\\d+): ", "s$1 ");
  s = replace_all(s, "partial for rank (\\d+)", "for r$1");
  s = replace_all(s, " partial\\(s\\)", "");
  s = replace_all(s, "partial", "part");
  s = replace_all(s, "chunk (\\d+)", "c$1");
  s = replace_all(s, "piece (\\d+)", "p$1");
  s = replace_all(s, " -> rank (\\d+)", "\u2192r$1");
  forms.push_back(s);
  s = without_words(s, std::regex("wait|for|part|s\\d+"));
  forms.push_back(s);
  forms.push_back(replace_all(s, " ", ""));
  for (const std::string& f : forms) {
    if (fits(f, width_px)) return f;
  }
  const auto room = static_cast<long>(std::floor((width_px - 2 * kPadPx) / kCharPx)) - 1;
  if (room < 2) return "";
  std::string cut = first_glyphs(forms.back(), static_cast<size_t>(room));
  while (!cut.empty() && cut.back() == ' ') cut.pop_back();
  return cut + "\u2026";
}

void write_svg_timeline(const std::string& path, const std::vector<RankTrace>& traces,
                        int transport_lane, const std::string& title) {
  Layout L;
  double t_end = 0.0;
  std::vector<std::pair<int, int>> rows;  // (rank, lane), in display order
  for (const RankTrace& t : traces) {
    std::set<int> lanes;
    for (const TraceSpan& s : t.spans) {
      if (s.lane >= 0) lanes.insert(s.lane);
      t_end = std::max(t_end, s.end_ms);
    }
    for (int lane : lanes) rows.push_back({t.rank, lane});
  }
  L.t_end = t_end > 0.0 ? t_end : 1.0;
  L.rows = rows.size();
  const int height = L.lanes_bottom() + 72;
  const int width = Layout::label_w + Layout::plot_w + 20;
  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<defs><pattern id=\"waiting\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fde8d4\"/>"
         "<rect width=\"2\" height=\"6\" fill=\"#d2722f\"/></pattern></defs>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"8\" y=\"18\" font-size=\"14\">" << escape_xml(title) << "</text>\n";
  const std::vector<Call> calls = calls_of(traces);
  draw_call_backgrounds(svg, L, calls);
  draw_axis(svg, L);
  draw_call_bands(svg, L, calls);
  std::map<std::pair<int, int>, int> row_of;
  for (size_t i = 0; i < rows.size(); ++i) {
    row_of[rows[i]] = static_cast<int>(i);
    const int y = Layout::lanes_top + static_cast<int>(i) * Layout::row_h;
    if (i > 0 && rows[i].first != rows[i - 1].first) {  // between ranks
      svg << "<line x1=\"4\" y1=\"" << y << "\" x2=\"" << width - 4 << "\" y2=\"" << y
          << "\" stroke=\"#bbb\"/>\n";
    }
    svg << "<text x=\"8\" y=\"" << y + 15 << "\">rank " << rows[i].first << " "
        << trace_lane_name(rows[i].second, transport_lane) << "</text>\n";
  }
  std::ostringstream texts;  // drawn last, over the bars and the hatching
  for (const RankTrace& t : traces) {
    // This rank's waits by the exchange they waited for, to hatch the transfers they overlap.
    std::map<std::pair<std::string, std::string>, std::vector<const TraceSpan*>> waits;
    for (const TraceSpan& s : t.spans) {
      if (s.category == "wait") waits[{s.group, s.name}].push_back(&s);
    }
    for (const TraceSpan& s : t.spans) {
      if (s.lane < 0) continue;
      const int y = Layout::lanes_top + row_of[{t.rank, s.lane}] * Layout::row_h + 3;
      const double x = L.x(s.start_ms), w = std::max(0.5, L.x(s.end_ms) - x);
      svg << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << w << "\" height=\""
          << Layout::bar_h << "\" fill=\"" << colour(s.category)
          << "\" stroke=\"white\" stroke-width=\"0.5\"><title>" << escape_xml(hover(s))
          << "</title></rect>\n";
      if (s.category == "transfer") {
        const auto it = waits.find({s.group, "wait for " + s.name});
        if (it != waits.end()) {
          for (const TraceSpan* wt : it->second) {
            const double a = std::max(s.start_ms, wt->start_ms), b = std::min(s.end_ms, wt->end_ms);
            if (b <= a) continue;
            svg << "<rect class=\"waited\" x=\"" << L.x(a) << "\" y=\"" << y << "\" width=\""
                << std::max(0.5, L.x(b) - L.x(a)) << "\" height=\"" << Layout::bar_h
                << "\" fill=\"url(#waiting)\" opacity=\"0.8\"><title>"
                << escape_xml(hover(*wt) + " on stream " + std::to_string(wt->lane))
                << "</title></rect>\n";
          }
        }
      }
      bar_text(texts, x, w, y + 12, s);
    }
  }
  svg << texts.str();
  draw_legend(svg, L);
  svg << "</svg>\n";
  write_replacing("trace", path, svg.str());
}

}  // namespace cgemm::launcher
