// The cost of chunking: a schedule's chunk GEMMs, back to back on one stream, against the
// whole local GEMM they tile, per case, collective, tp and chunks per rank. Issue #9's target
// is 3%; the floor is what torch pays for the same chunks, so both ratios are shown side by
// side: torch.mm on bf16 (bench/peers/torch_chunking.py), or, with --scaling delayed or
// current, torch._scaled_mm on e4m3 (bench/peers/torch_scaled_mm.py) beside the FP8 GEMMs
// the runtime plans on the quantized operands (issue 23 item 7). The dtype column lets rows
// of both kinds share one file.

#include <cmath>
#include <limits>

#include "common/job.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

// `peer`: the torch call whose times fill the torch columns.
Table chunking_table(const std::string& peer) {
  constexpr unsigned kData = Column::kCsv | Column::kJson;
  return Table(
      {{"case", "", "", 0, -1, "", Column::kAll},
       {"collective", "", "", 0, -1, "", Column::kAll},
       {"tp", "", "", 0, -1, "", Column::kAll},
       {"chunks", "", "", 0, -1, "", Column::kAll},
       {"dtype", "dtype (lhs x rhs)", "", 0, -1, "", Column::kAll},
       {"chunk_gemm", "chunk GEMM [batch x] m x n x k", "", 0, -1, "", Column::kAll},
       {"whole_ms", "whole GEMM ms", "ms", 4, 3, "", Column::kAll},
       {"chunks_ms", "sum of chunks ms", "ms", 4, 3, "", Column::kAll},
       {"ratio", "chunks / whole", "", 3, 3, "", Column::kAll},
       {"torch_whole_ms", peer + " whole ms", "ms", 4, 3, "", kData},
       {"torch_chunks_ms", peer + " chunks ms", "ms", 4, 3, "", kData},
       {"torch_ratio", peer + " chunks / whole", "", 3, 3, "", Column::kAll},
       {"vs_torch_chunks", "cgemm chunks / " + peer + " chunks", "", 3, 3, "", Column::kAll},
       {"torch_vs_cgemm_whole", peer + " / cgemm whole", "", 3, 3, "", Column::kAll}});
}

Cell or_blank(double v) {
  if (std::isnan(v)) return std::string();
  return v;
}

}  // namespace

Table chunking(Backend& be, const std::vector<BenchShape>& shapes, const Settings& s,
               const TorchChunkTable& torch) {
  const QuantizationDesc& q = s.quantization;
  const std::string dtype = chunk_dtype(q);
  Table table = chunking_table(q.mode == ScalingMode::kNoScaling ? "torch.mm" : "torch._scaled_mm");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // A file of another dtype joins nothing (run_parts refuses it before any timing).
  const bool join = torch.dtype == dtype;
  for (const BenchShape& sh : shapes) {
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      const std::string coll(collective_name(op));
      for (int tp : s.tps) {
        std::vector<int> counts;  // chunks per rank this case splits into
        for (int c : s.chunks_per_rank) {
          const std::string why = why_not_split(sh, op, tp, c, q);
          if (why.empty()) {
            counts.push_back(c);
          } else {
            say("chunking: " + sh.name + " " + coll + " tp " + std::to_string(tp) + ", " +
                std::to_string(c) + " chunk(s) per rank: skipped (" + why + ")");
          }
        }
        if (counts.empty()) continue;
        const ChunkedGemm whole = chunked_gemm(sh, op, tp, counts.front(), q);
        Operands ops(be, whole, s.l2_bytes, q);
        std::vector<std::function<void()>> fns;
        fns.emplace_back([&] { be.gemm(ops.bind(whole.whole, ops.next_lhs(), 0, 0), 0); });
        std::vector<ChunkedGemm> chunked;
        for (int c : counts) chunked.push_back(chunked_gemm(sh, op, tp, c, q));
        for (const ChunkedGemm& g : chunked) {
          fns.emplace_back([&] {
            const Operands::Lhs lhs = ops.next_lhs();
            for (const ChunkGemm& c : g.chunks) {
              be.gemm(ops.bind(c.task, lhs, c.lhs_offset, c.out_offset), 0);
            }
          });
        }
        const std::vector<double> ms = interleaved_medians(be, fns, s.warmup, s.iterations);
        for (size_t i = 0; i < chunked.size(); ++i) {
          const int chunks = tp * counts[i];
          const auto it = torch.rows.find(torch_key(sh.name, coll, tp, chunks));
          const bool found = join && it != torch.rows.end();
          const double tw = found ? it->second.whole_ms : nan;
          const double tc = found ? it->second.chunks_ms : nan;
          const double ratio = ms[i + 1] / ms[0];
          table.add({sh.name, coll, static_cast<int64_t>(tp), static_cast<int64_t>(chunks), dtype,
                     gemm_text(chunked[i].chunks.front().task), ms[0], ms[i + 1], ratio,
                     or_blank(tw), or_blank(tc), or_blank(tc / tw), or_blank(ms[i + 1] / tc),
                     or_blank(tw / ms[0])});
          say("chunking: " + sh.name + " " + coll + " tp " + std::to_string(tp) + ", " +
              std::to_string(chunks) + " chunks, " + dtype + ": whole " + std::to_string(ms[0]) +
              " ms, chunks " + std::to_string(ms[i + 1]) + " ms, ratio " + std::to_string(ratio));
        }
      }
    }
  }
  return table;
}

}  // namespace cgemm::launcher::parts
