// The chunk geometry of the runtime's schedules (runtime/src/collectives/), rebuilt from a
// bench case so the chunk GEMMs can be timed alone, on one GPU, at any tp. Pieces
// (chunks_per_rank > 1) split a chunk as the runtime's split_into_pieces does: by whole batch
// blocks when batch > 1 (batch-first, strided chunks), else by rows.

#include <string>

#include "cgemm/core/error.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

struct Dims {
  int64_t batch, seq, k, n;  // the local GEMM: [batch * seq, k] @ [k, n]
  int64_t split;             // the global hidden size tp divides
};

Dims local_dims(const BenchShape& sh, CollectiveOp op, int tp) {
  if (op == CollectiveOp::kAllGather)
    return {sh.batch, sh.seq, sh.ag_in, sh.ag_out / tp, sh.ag_out};
  return {sh.batch, sh.seq, sh.rs_in / tp, sh.rs_out, sh.rs_in};
}

GemmTask dense(int64_t m, int64_t n, int64_t k) {
  GemmTask t;
  t.m = m;
  t.n = n;
  t.k = k;
  t.lda = k;
  t.ldb = n;
  t.ldc = n;
  return t;
}

}  // namespace

std::string why_not_split(const BenchShape& sh, CollectiveOp op, int tp, int chunks_per_rank) {
  if (op != CollectiveOp::kAllGather && op != CollectiveOp::kReduceScatter) {
    return "only all_gather and reduce_scatter GEMMs are chunked";
  }
  if (tp < 1 || chunks_per_rank < 1) return "tp and chunks per rank must be >= 1";
  const Dims d = local_dims(sh, op, tp);
  if (d.split % tp != 0) {
    return std::string(op == CollectiveOp::kAllGather ? "hidden_out " : "hidden_in ") +
           std::to_string(d.split) + " does not split over tp = " + std::to_string(tp);
  }
  if (d.seq % tp != 0) {
    return "seq " + std::to_string(d.seq) + " does not split over tp = " + std::to_string(tp);
  }
  if (d.batch > 1 && d.batch % chunks_per_rank != 0) {
    return std::to_string(chunks_per_rank) + " chunks per rank do not divide the batch " +
           std::to_string(d.batch) + " (batch-first chunks split by batch blocks)";
  }
  if (d.batch == 1 && (d.seq / tp) % chunks_per_rank != 0) {
    return std::to_string(chunks_per_rank) + " chunks per rank do not divide a chunk's " +
           std::to_string(d.seq / tp) + " rows";
  }
  return "";
}

bool splits(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank) {
  return why_not_split(shape, op, tp, chunks_per_rank).empty();
}

ChunkedGemm chunked_gemm(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank) {
  if (const std::string why = why_not_split(shape, op, tp, chunks_per_rank); !why.empty()) {
    throw Error("case '" + shape.name + "' " + std::string(collective_name(op)) + " at tp " +
                std::to_string(tp) + " with " + std::to_string(chunks_per_rank) +
                " chunk(s) per rank: " + why);
  }
  const Dims d = local_dims(shape, op, tp);
  const int64_t rows = d.batch * d.seq;
  const int64_t slot_seq = d.seq / tp;  // one rank's sequence rows per batch block
  // A piece: batch / chunks_per_rank whole batch blocks of slot_seq rows (batch > 1), or
  // slot_seq / chunks_per_rank rows (batch 1), as the runtime's piece_task.
  const int64_t blocks = d.batch > 1 ? d.batch / chunks_per_rank : 1;
  const int64_t piece = d.batch > 1 ? slot_seq : slot_seq / chunks_per_rank;
  ChunkedGemm g;
  g.whole = dense(rows, d.n, d.k);
  g.lhs_elems = rows * d.k;
  g.rhs_elems = d.k * d.n;
  g.out_elems = rows * d.n;
  g.step_lhs_elems = d.batch * slot_seq * d.k;
  g.step_out_elems = d.batch * slot_seq * d.n;
  const bool ag = op == CollectiveOp::kAllGather;
  for (int s = 0; s < tp; ++s) {
    // Rank 0's order: all-gather computes its own chunk, then those from the left (tp-1,
    // tp-2, ...); reduce-scatter computes the partials for ranks 1, 2, ..., then its own.
    const int r = ag ? (tp - s) % tp : (s + 1) % tp;
    for (int j = 0; j < chunks_per_rank; ++j) {
      // The piece's first row: in rank r's slot (all-gather's ring, reduce-scatter's send
      // slots: [batch, slot_seq] rows) and in the whole tensor ([batch, seq] rows).
      const int64_t b0 = d.batch > 1 ? j * blocks : 0;
      const int64_t row0 = d.batch > 1 ? 0 : j * piece;
      const int64_t in_slot = b0 * slot_seq + row0;
      const int64_t in_whole = b0 * d.seq + r * slot_seq + row0;
      ChunkGemm c;
      c.task = dense(piece, d.n, d.k);
      if (ag) {
        c.lhs_offset = r * g.step_lhs_elems + in_slot * d.k;
        c.out_offset = in_whole * d.n;
      } else {
        c.lhs_offset = in_whole * d.k;
        c.out_offset = r * g.step_out_elems + in_slot * d.n;
      }
      if (blocks > 1) {
        c.task.batch = blocks;
        c.task.lhs_batch_stride = ag ? slot_seq * d.k : d.seq * d.k;
        c.task.out_batch_stride = ag ? d.seq * d.n : slot_seq * d.n;
      }
      g.chunks.push_back(c);
    }
  }
  return g;
}

}  // namespace cgemm::launcher::parts
