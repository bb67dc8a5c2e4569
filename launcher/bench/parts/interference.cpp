// Interference: one ring step's chunk GEMM alone, and the same GEMM while a copy of the bytes
// that step moves (all-gather: one rank's lhs slot; reduce-scatter: one destination's partial)
// runs on another stream, as the copy-engine transport's copy runs beside the GEMM. The GEMM's
// own time comes from the trace's CUDA events around it, so a copy that outlasts the GEMM
// does not count; the copy's own time beside the GEMM comes from its events the same way. Issue
// #9's target: the GEMM slows by at most 5%. On one GPU the copy reads and writes the same HBM as
// the GEMM: a worst case for NVLink copies, which only write here.

#include "cgemm/core/error.hpp"
#include "common/job.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

Table interference_table() {
  return Table({{"case", "", "", 0, -1, "", Column::kAll},
                {"collective", "", "", 0, -1, "", Column::kAll},
                {"tp", "", "", 0, -1, "", Column::kAll},
                {"chunk_gemm", "chunk GEMM [batch x] m x n x k", "", 0, -1, "", Column::kAll},
                {"step_mib", "step MiB", "MiB", 3, 1, "", Column::kAll},
                {"gemm_ms", "GEMM alone ms", "ms", 4, 3, "", Column::kAll},
                {"gemm_with_copy_ms", "GEMM beside the copy ms", "ms", 4, 3, "", Column::kAll},
                {"slowdown", "GEMM slowdown", "", 3, 3, "x", Column::kAll},
                {"copy_ms", "copy alone ms", "ms", 4, 3, "", Column::kAll},
                {"copy_beside_ms", "copy beside the GEMM ms", "ms", 4, 3, "", Column::kAll},
                {"both_ms", "both done ms", "ms", 4, 3, "", Column::kAll}});
}

// The durations of the GEMM span and of the copy span (-1: none) of the trace taken since the
// last call.
struct Spans {
  double gemm_ms = -1, copy_ms = -1;
};
Spans take_spans(Backend& be) {
  Spans out;
  for (const TraceSpan& sp : be.take_trace()) {
    if (sp.category == "gemm") out.gemm_ms = sp.end_ms - sp.start_ms;
    if (sp.category == "transfer") out.copy_ms = sp.end_ms - sp.start_ms;
  }
  if (out.gemm_ms < 0) throw Error("interference: the trace holds no GEMM span");
  return out;
}

}  // namespace

Table interference(Backend& be, const std::vector<BenchShape>& shapes, const Settings& s) {
  if (be.num_streams() < 2) {
    throw Error(
        "interference needs a second compute stream for the copy: set num_max_streams >= 2");
  }
  Table table = interference_table();
  for (const BenchShape& sh : shapes) {
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      const bool ag = op == CollectiveOp::kAllGather;
      const std::string coll(collective_name(op));
      for (int tp : s.tps) {
        if (tp == 1) continue;  // tp 1 moves nothing
        if (const std::string why = why_not_split(sh, op, tp, 1); !why.empty()) {
          say("interference: " + sh.name + " " + coll + " tp " + std::to_string(tp) +
              ": skipped (" + why + ")");
          continue;
        }
        const ChunkedGemm g = chunked_gemm(sh, op, tp, 1);
        const ChunkGemm& chunk = g.chunks.front();
        const size_t bytes = static_cast<size_t>(ag ? g.step_lhs_elems : g.step_out_elems) * 2;
        Operands ops(be, g, s.l2_bytes);
        CopyBuffers copies(be, bytes, s.l2_bytes);
        const auto gemm = [&] {
          be.gemm(ops.bind(chunk.task, ops.next_lhs(), chunk.lhs_offset, chunk.out_offset), 0);
        };
        const auto copy = [&] {
          const auto [dst, src] = copies.next();
          be.copy(dst, src, bytes, 1, "step copy");
        };
        const auto both = [&] {
          copy();  // started first, as a step starts its exchange before its GEMM
          gemm();
        };
        for (int i = 0; i < s.warmup; ++i) {
          gemm();
          copy();
          both();
        }
        std::vector<double> alone, beside, copy_ms, copy_beside, both_ms;
        be.set_tracing(true);
        try {
          for (int i = 0; i < s.iterations; ++i) {
            be.time_ms(gemm);
            alone.push_back(take_spans(be).gemm_ms);
            copy_ms.push_back(be.time_ms(copy));
            be.take_trace();
            both_ms.push_back(be.time_ms(both));
            const Spans sp = take_spans(be);
            beside.push_back(sp.gemm_ms);
            copy_beside.push_back(sp.copy_ms);
          }
        } catch (...) {
          be.set_tracing(false);
          throw;
        }
        be.set_tracing(false);
        const double a = median(alone), b = median(beside);
        table.add({sh.name, coll, static_cast<int64_t>(tp), gemm_text(chunk.task),
                   static_cast<double>(bytes) / 1048576.0, a, b, b / a, median(copy_ms),
                   median(copy_beside), median(both_ms)});
        say("interference: " + sh.name + " " + coll + " tp " + std::to_string(tp) + ": GEMM " +
            std::to_string(a) + " ms alone, " + std::to_string(b) + " ms beside a copy of " +
            std::to_string(bytes >> 20) + " MiB (" + std::to_string(b / a) + "x)");
      }
    }
  }
  return table;
}

}  // namespace cgemm::launcher::parts
