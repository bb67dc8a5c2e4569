// All-gather GEMM (column-parallel layer, sequence-parallel input): x [B, S/tp, K] on each
// rank, w [K, N/tp]; out [B, S, N/tp]. Chunk c is rank c's lhs shard; the ring of
// schedule.hpp brings the chunks in while the GEMM of the chunk in hand runs, each chunk on
// the next compute stream, and writes each chunk's rows straight to its place in the output
// (strided over the batch for batch-first activations: no reorder pass).

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

Program overlapped(const GemmGeometry& g) {
  Program p;
  p.workspace.ring = g.tp > 1 ? g.times(g.chunk_lhs_bytes(), g.tp, "ring") : 0;
  p.ops.push_back(ForkOp{});
  int previous = -1;  // token slot of the exchange the next step's chunks arrive by
  int gemm_index = 0;
  int step_index = 0;
  for (const AllGatherStep& step : all_gather_schedule(g.tp, g.me, g.aggregate)) {
    const std::string step_name = g.name + " step " + std::to_string(step_index++) + ": ";
    const int stream = gemm_index % g.num_streams;
    if (previous >= 0) p.ops.push_back(WaitOp{previous, stream});
    const int arrived = previous;
    previous = -1;
    if (!step.transfers.empty()) {
      ExchangeOp x;
      for (const ChunkTransfer& tr : step.transfers) {
        // Chunk c lives at slot c of every rank's ring.
        x.transfers.push_back({chunk_lhs(g, tr.send_chunk), g.chunk_lhs_bytes(), tr.send_peer,
                               static_cast<size_t>(tr.send_chunk) * g.chunk_lhs_bytes(),
                               tr.recv_peer,
                               static_cast<size_t>(tr.recv_chunk) * g.chunk_lhs_bytes(),
                               step_name + "chunk " + std::to_string(tr.send_chunk) + " -> rank " +
                                   std::to_string(tr.send_peer)});
      }
      x.token = previous = p.tokens++;
      p.ops.push_back(std::move(x));
    }
    for (int c : step.compute) {
      const int s = gemm_index++ % g.num_streams;
      // A second chunk of the step (aggregate mode) may land on another stream: it waits
      // for the exchange too.
      if (s != stream && c != g.me && arrived >= 0) p.ops.push_back(WaitOp{arrived, s});
      p.ops.push_back(GemmOp{g.chunk_task(g.seq_rows * g.k, g.seq_total * g.n), chunk_lhs(g, c),
                             chunk_out(g, c), g.fuse_bias, s,
                             g.name + " gemm chunk " + std::to_string(c)});
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
  c.summary = std::to_string(g.tp) + " chunks of " + std::to_string(g.chunk_rows) + " rows in " +
              std::to_string(steps) + " steps on " + std::to_string(g.num_streams) +
              " stream(s), k=" + std::to_string(g.k) + ", n=" + std::to_string(g.n) +
              (g.strided ? ", strided placement for batch " + std::to_string(g.batch) : "") +
              (g.aggregate ? ", aggregate" : "");
  return c;
}

}  // namespace cgemm
