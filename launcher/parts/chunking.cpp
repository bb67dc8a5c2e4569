// The cost of chunking: a schedule's chunk GEMMs, back to back on one stream, against the
// whole local GEMM they tile, per case, collective, tp and chunks per rank. Issue #9's target
// is 3%; the floor is what torch.mm pays for the same chunks (bench/peers/torch_chunking.py),
// so both ratios are shown side by side.

#include <cmath>
#include <limits>

#include "job.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

Table chunking_table() {
  constexpr unsigned kData = Column::kCsv | Column::kJson;
  return Table({{"case", "", "", 0, -1, "", Column::kAll},
                {"collective", "", "", 0, -1, "", Column::kAll},
                {"tp", "", "", 0, -1, "", Column::kAll},
                {"chunks", "", "", 0, -1, "", Column::kAll},
                {"chunk_gemm", "chunk GEMM [batch x] m x n x k", "", 0, -1, "", Column::kAll},
                {"whole_ms", "whole GEMM ms", "ms", 4, 3, "", Column::kAll},
                {"chunks_ms", "sum of chunks ms", "ms", 4, 3, "", Column::kAll},
                {"ratio", "chunks / whole", "", 3, 3, "", Column::kAll},
                {"torch_whole_ms", "torch.mm whole ms", "ms", 4, 3, "", kData},
                {"torch_chunks_ms", "torch.mm chunks ms", "ms", 4, 3, "", kData},
                {"torch_ratio", "torch.mm chunks / whole", "", 3, 3, "", Column::kAll},
                {"vs_torch_chunks", "cgemm chunks / torch.mm chunks", "", 3, 3, "", Column::kAll},
                {"torch_vs_cgemm_whole", "torch.mm / cgemm whole", "", 3, 3, "", Column::kAll}});
}

Cell or_blank(double v) {
  if (std::isnan(v)) return std::string();
  return v;
}

}  // namespace

Table chunking(Backend& be, const std::vector<BenchShape>& shapes, const Settings& s,
               const TorchChunkTable& torch) {
  Table table = chunking_table();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const BenchShape& sh : shapes) {
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      const std::string coll(collective_name(op));
      for (int tp : s.tps) {
        std::vector<int> counts;  // chunks per rank this case splits into
        for (int c : s.chunks_per_rank) {
          const std::string why = why_not_split(sh, op, tp, c);
          if (why.empty()) {
            counts.push_back(c);
          } else {
            say("chunking: " + sh.name + " " + coll + " tp " + std::to_string(tp) + ", " +
                std::to_string(c) + " chunk(s) per rank: skipped (" + why + ")");
          }
        }
        if (counts.empty()) continue;
        const ChunkedGemm whole = chunked_gemm(sh, op, tp, counts.front());
        Operands ops(be, whole, s.l2_bytes);
        std::vector<std::function<void()>> fns;
        fns.emplace_back([&] { be.gemm(ops.bind(whole.whole, ops.next_lhs(), 0, 0), 0); });
        std::vector<ChunkedGemm> chunked;
        for (int c : counts) chunked.push_back(chunked_gemm(sh, op, tp, c));
        for (const ChunkedGemm& g : chunked) {
          fns.emplace_back([&] {
            const char* lhs = ops.next_lhs();
            for (const ChunkGemm& c : g.chunks) {
              be.gemm(ops.bind(c.task, lhs, c.lhs_offset, c.out_offset), 0);
            }
          });
        }
        const std::vector<double> ms = interleaved_medians(be, fns, s.warmup, s.iterations);
        for (size_t i = 0; i < chunked.size(); ++i) {
          const int chunks = tp * counts[i];
          const auto it = torch.find(torch_key(sh.name, coll, tp, chunks));
          const double tw = it == torch.end() ? nan : it->second.whole_ms;
          const double tc = it == torch.end() ? nan : it->second.chunks_ms;
          const double ratio = ms[i + 1] / ms[0];
          table.add({sh.name, coll, static_cast<int64_t>(tp), static_cast<int64_t>(chunks),
                     gemm_text(chunked[i].chunks.front().task), ms[0], ms[i + 1], ratio,
                     or_blank(tw), or_blank(tc), or_blank(tc / tw), or_blank(ms[i + 1] / tc),
                     or_blank(tw / ms[0])});
          say("chunking: " + sh.name + " " + coll + " tp " + std::to_string(tp) + ", " +
              std::to_string(chunks) + " chunks: whole " + std::to_string(ms[0]) + " ms, chunks " +
              std::to_string(ms[i + 1]) + " ms, ratio " + std::to_string(ratio));
        }
      }
    }
  }
  return table;
}

}  // namespace cgemm::launcher::parts
