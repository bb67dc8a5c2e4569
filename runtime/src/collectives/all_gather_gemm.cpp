// All-gather GEMM (column-parallel layer, sequence-parallel input): x [B, S/tp, K] on each
// rank, w [K, N/tp]; out [B, S, N/tp]. Chunk c is rank c's lhs shard; the ring of
// schedule.hpp brings the chunks in while the GEMM of the chunk in hand runs, each chunk on
// the next compute stream, and writes each chunk's rows straight to its place in the output
// (strided over the batch for batch-first activations: no reorder pass).

#include <algorithm>
#include <vector>

#include "../collective_gemm.hpp"
#include "cgemm/runtime/schedule.hpp"

namespace cgemm {

namespace {

// Where chunk c's GEMM reads: this rank's lhs, or slot c of the ring.
Ref chunk_lhs(const GemmGeometry& g, int c) {
  if (c == g.me) return {Buf::kLhs};
  return {Buf::kRing, static_cast<size_t>(c) * g.chunk_lhs_bytes()};
}

// Where it writes: rows c*S/tp.. of every batch block (strided) or the c-th block of rows.
Ref chunk_out(const GemmGeometry& g, int c) {
  const int64_t row = g.strided ? c * g.seq_rows : c * g.chunk_rows;
  return {Buf::kOut, static_cast<size_t>(row * g.n) * g.out_size()};
}

// With chunks_per_rank > 1 every chunk moves and multiplies in pieces: piece j of a chunk goes
// on in its own exchange, and its GEMM waits only for that exchange, so the next step's first
// GEMM starts after a piece has arrived rather than the whole chunk.
Program overlapped(const GemmGeometry& g) {
  Program p;
  p.workspace.ring = g.tp > 1 ? g.times(g.chunk_lhs_bytes(), g.tp, "ring") : 0;
  p.ops.push_back(ForkOp{});
  const size_t piece_bytes = g.piece_lhs_bytes();
  const size_t piece_lhs = static_cast<size_t>(g.piece_step(true, g.k)) * g.in_size();
  const size_t piece_out = static_cast<size_t>(g.piece_step(false, g.n)) * g.out_size();
  // Token slots of the exchanges (one per piece) the next step's chunks arrive by; -1: none.
  std::vector<int> previous(static_cast<size_t>(g.pieces), -1);
  int gemm_index = 0;
  int step_index = 0;
  for (const AllGatherStep& step : all_gather_schedule(g.tp, g.me, g.aggregate)) {
    const std::string step_name = g.name + " step " + std::to_string(step_index++) + ": ";
    const std::vector<int> arrived = previous;
    std::fill(previous.begin(), previous.end(), -1);
    for (int j = 0; j < g.pieces && !step.transfers.empty(); ++j) {
      ExchangeOp x;
      const size_t at = static_cast<size_t>(j) * piece_bytes;
      const std::string piece = g.pieces > 1 ? " piece " + std::to_string(j) : "";
      for (const ChunkTransfer& tr : step.transfers) {
        // Chunk c lives at slot c of every rank's ring.
        x.transfers.push_back({chunk_lhs(g, tr.send_chunk).plus(at), piece_bytes, tr.send_peer,
                               static_cast<size_t>(tr.send_chunk) * g.chunk_lhs_bytes() + at,
                               tr.recv_peer,
                               static_cast<size_t>(tr.recv_chunk) * g.chunk_lhs_bytes() + at,
                               step_name + "chunk " + std::to_string(tr.send_chunk) + piece +
                                   " -> rank " + std::to_string(tr.send_peer)});
      }
      x.token = previous[static_cast<size_t>(j)] = p.tokens++;
      p.ops.push_back(std::move(x));
    }
    for (int c : step.compute) {
      for (int j = 0; j < g.pieces; ++j) {
        const int s = gemm_index++ % g.num_streams;
        const int token = arrived[static_cast<size_t>(j)];
        if (c != g.me && token >= 0) p.ops.push_back(WaitOp{token, s});
        p.ops.push_back(GemmOp{g.piece_task(g.seq_rows * g.k, g.seq_total * g.n),
                               chunk_lhs(g, c).plus(static_cast<size_t>(j) * piece_lhs),
                               chunk_out(g, c).plus(static_cast<size_t>(j) * piece_out),
                               g.fuse_bias, s,
                               g.name + " gemm chunk " + std::to_string(c) +
                                   (g.pieces > 1 ? " piece " + std::to_string(j) : "")});
      }
    }
  }
  p.ops.push_back(JoinOp{0});
  return p;
}

// Rows of the gathered lhs (tp x this rank's), checked.
int64_t c_rows(const GemmGeometry& g) {
  return checked_mul(g.tp, g.lhs_rows, "GEMM '" + g.name + "' gathered rows");
}

// The whole gathered lhs [tp, B, S/tp, K] in one GEMM; rank-major rows, so batch-first
// outputs of local batch > 1 need the dp-leading reorder after it.
GemmTask whole(const GemmGeometry& g) {
  GemmTask t = g.task();
  t.m = c_rows(g);
  return t;
}

Program sequential(const GemmGeometry& g) {
  Program p;
  p.workspace.work_in = g.times(g.lhs_bytes(), g.tp, "gathered lhs");
  p.ops.push_back(AllGatherOp{
      {Buf::kLhs}, {Buf::kWorkIn}, g.lhs_bytes(), 0, g.name + " sequential all-gather"});
  const std::string label = g.name + " gemm";
  if (g.strided) {
    p.workspace.work_out = g.bytes(c_rows(g), g.n, g.out_size(), "gathered output");
    p.ops.push_back(GemmOp{whole(g), {Buf::kWorkIn}, {Buf::kWorkOut}, g.fuse_bias, 0, label});
    p.ops.push_back(ReorderOp{
        ReorderKind::kDpLeading, g.out_local, g.dp, {Buf::kWorkOut}, {Buf::kOut}, g.out, 0});
  } else {
    p.ops.push_back(GemmOp{whole(g), {Buf::kWorkIn}, {Buf::kOut}, g.fuse_bias, 0, label});
  }
  return p;
}

}  // namespace

CollectiveGemm make_all_gather_gemm(GemmGeometry& g) {
  require_sequence_layout(g);
  g.chunk_rows = g.lhs_rows;
  place_strided_if_reordered(g, ReorderKind::kDpLeading, g.out_local);
  split_into_pieces(g);
  CollectiveGemm c;
  // Every offset the programs compute is below these checked totals: they cannot overflow.
  c.gemm_rows = c_rows(g);
  g.bytes(c.gemm_rows, g.n, g.out_size(), "gathered output");
  g.bytes(c.gemm_rows, g.k, g.in_size(), "gathered lhs");
  c.overlapped = overlapped(g);
  c.sequential = sequential(g);
  c.gemm_only.workspace.work_in = g.times(g.lhs_bytes(), g.tp, "gathered lhs");
  c.gemm_only.ops.push_back(
      GemmOp{whole(g), {Buf::kWorkIn}, {Buf::kOut}, false, 0, g.name + " gemm"});
  c.collective_only.workspace.work_in = c.gemm_only.workspace.work_in;
  c.collective_only.ops.push_back(AllGatherOp{
      {Buf::kLhs}, {Buf::kWorkIn}, g.lhs_bytes(), 0, g.name + " sequential all-gather"});
  const auto steps = all_gather_schedule(g.tp, g.me, g.aggregate).size();
  c.summary = std::to_string(g.tp) + " chunks of " + std::to_string(g.chunk_rows) + " rows" +
              (g.pieces > 1 ? " in " + std::to_string(g.pieces) + " pieces each" : "") + " in " +
              std::to_string(steps) + " steps on " + std::to_string(g.num_streams) +
              " stream(s), k=" + std::to_string(g.k) + ", n=" + std::to_string(g.n) +
              (g.strided ? ", strided placement for batch " + std::to_string(g.batch) : "") +
              (g.aggregate ? ", aggregate" : "");
  return c;
}

}  // namespace cgemm
