// Reduce-scatter GEMM (row-parallel layer): x [B, S, K/tp] on each rank, w [K/tp, N]; the
// partial products are summed over the TP group and scattered along the sequence, so each
// rank ends with out [B, S/tp, N]. Step s of schedule.hpp computes the partial for one
// destination rank and sends it there while the next is computed; the partials run in order
// on one stream (on several they would share the GPU, finish late together, and hold the
// first transfer back). Each rank then sums the tp partials of its rows in fp32 in rank order,
// so a run is bit-for-bit repeatable, and adds the bias after the sum (gemm.py: output += bias).
// x may also be [K/tp, S, B] or [K/tp, 1, S] (a transposed lhs): each partial then reads a
// column block of it.

#include "cgemm/runtime/schedule.hpp"
#include "collective_gemm.hpp"

namespace cgemm {

namespace {

// The partial for `dest` reads rows dest*S/tp.. of every batch block (strided) or one block:
// this many bytes into the local lhs (a transposed lhs [K, M]: that many columns in).
size_t dest_rows(const GemmGeometry& g, int dest) {
  const int64_t first_row = g.strided ? dest * g.seq_rows : dest * g.chunk_rows;
  return static_cast<size_t>(g.lhs_transposed ? first_row : first_row * g.k) * g.in_size();
}

Ref ring_slot(const GemmGeometry& g, int p) {
  return {Workspace::kRing, static_cast<size_t>(p) * g.chunk_out_bytes()};
}

// The bias, added after the sum over ranks (gemm.py: output += bias after the reduction).
std::optional<Ref> bias(const GemmGeometry& g) {
  return g.has_bias ? std::optional<Ref>(Ref{Operand::kBias}) : std::nullopt;
}

Program overlapped(const GemmGeometry& g) {
  Program p;
  const int64_t count = g.chunk_rows * g.n;
  const GemmTask chunk = g.chunk_task(g.seq_total * g.k, g.seq_rows * g.n);
  p.ops.push_back(ForkOp{});
  if (g.tp == 1) {  // nothing to reduce: the one partial is the output
    p.ops.push_back(g.gemm(chunk, g.lhs_src, {Operand::kOut}, std::nullopt, 0, g.name + " gemm"));
    if (g.has_bias) {
      p.ops.push_back(
          SumOp{{{Operand::kOut}}, g.out, count, bias(g), g.n, {Operand::kOut}, g.out, 0});
    }
    p.ops.push_back(JoinOp{0});
    return p;
  }
  p.workspace.ring = static_cast<int64_t>(g.times(g.chunk_out_bytes(), g.tp, "ring"));
  p.workspace.send = p.workspace.ring;
  // With chunks_per_rank > 1 each partial is computed and sent in pieces: the first transfer
  // starts after a piece's GEMM instead of the whole partial's.
  const size_t piece_bytes = g.piece_out_bytes();
  const size_t piece_lhs =
      static_cast<size_t>(g.piece_step(false, g.lhs_transposed ? 1 : g.k)) * g.in_size();
  const size_t piece_out = static_cast<size_t>(g.piece_step(true, g.n)) * g.out_size();
  const GemmTask piece = g.piece_task(g.seq_total * g.k, g.seq_rows * g.n);
  std::vector<int> tokens;
  int step_index = 0;
  for (const ReduceScatterStep& step : reduce_scatter_schedule(g.tp, g.me)) {
    const std::string step_name = g.name + " step " + std::to_string(step_index++) + ": ";
    // The partial from rank q lives at slot q of the destination's ring.
    const Ref partial =
        step.dest == g.me
            ? ring_slot(g, g.me)
            : Ref{Workspace::kSend, static_cast<size_t>(step.dest) * g.chunk_out_bytes()};
    for (int j = 0; j < g.pieces; ++j) {
      const std::string name = g.pieces > 1 ? " piece " + std::to_string(j) : "";
      const size_t lhs_at = dest_rows(g, step.dest) + static_cast<size_t>(j) * piece_lhs;
      const Ref out = partial.plus(static_cast<size_t>(j) * piece_out);
      p.ops.push_back(g.gemm(piece, g.lhs_src.plus(lhs_at), out, std::nullopt, 0,
                             g.name + " gemm partial for rank " + std::to_string(step.dest) + name,
                             lhs_at));
      if (step.dest == g.me) continue;
      const size_t at = static_cast<size_t>(j) * piece_bytes;
      ExchangeOp x;
      x.transfers.push_back(
          {out, piece_bytes, step.dest, static_cast<size_t>(g.me) * g.chunk_out_bytes() + at,
           step.recv_from, static_cast<size_t>(step.recv_from) * g.chunk_out_bytes() + at,
           step_name + "partial" + name + " -> rank " + std::to_string(step.dest)});
      x.after_stream = 0;
      x.token = p.tokens++;
      tokens.push_back(x.token);
      p.ops.push_back(std::move(x));
    }
  }
  for (int t : tokens) p.ops.push_back(WaitOp{t, 0});
  p.ops.push_back(JoinOp{0});
  SumOp sum{{}, g.out, count, bias(g), g.n, {Operand::kOut}, g.out, 0};
  for (int q = 0; q < g.tp; ++q) sum.parts.push_back(ring_slot(g, q));
  p.ops.push_back(std::move(sum));
  return p;
}

// The whole local GEMM [lhs rows, n] into kWorkOut, the reduced chunk behind it.
size_t partial_bytes(const GemmGeometry& g) {
  return g.bytes(g.lhs_rows, g.n, g.out_size(), "partial products");
}

// The partials and the reduced chunk behind them, checked.
size_t work_out_bytes(const GemmGeometry& g) {
  return static_cast<size_t>(checked_add(static_cast<int64_t>(partial_bytes(g)),
                                         static_cast<int64_t>(g.chunk_out_bytes()),
                                         "GEMM '" + g.name + "' sequential workspace"));
}

GemmTask whole(const GemmGeometry& g) {
  GemmTask t = g.task();
  t.m = g.lhs_rows;
  return t;
}

// The tpsp-leading reorder (batch-first, local batch > 1), one GEMM, the reduce-scatter, then
// the bias.
Program sequential(const GemmGeometry& g) {
  Program p;
  const int64_t count = g.chunk_rows * g.n;
  p.workspace.work_out = static_cast<int64_t>(work_out_bytes(g));
  Ref a = g.lhs_src;
  std::optional<Ref> scales;  // the lhs block scales, where the reorder moved them
  if (g.strided) {
    p.workspace.work_in = static_cast<int64_t>(g.lhs_bytes());
    p.ops.push_back(ReorderOp{
        ReorderKind::kTpspLeading, g.lhs_local, g.dp, g.lhs_src, {Workspace::kWorkIn}, g.in, 0});
    a = {Workspace::kWorkIn};
    if (g.lhs_block > 0) {
      // gemm.py reorders the lhs scale_inv tpsp-leading with the lhs (its impl, 739-746): one
      // byte per block, so its shape is [B, S, K / block] (K flattened: it may be several dims).
      const Shape shape{g.lhs_local[0], g.lhs_local[1], g.k / g.lhs_block};
      scales = Ref{Workspace::kWorkIn, g.lhs_bytes()};
      p.workspace.work_in += num_elements(shape);
      p.ops.push_back(ReorderOp{ReorderKind::kTpspLeading, shape, g.dp, *g.scales.lhs_block,
                                *scales, DType::kFloat8E4M3, 0});
    }
  }
  p.ops.push_back(
      g.gemm(whole(g), a, {Workspace::kWorkOut}, std::nullopt, 0, g.name + " gemm", 0, scales));
  const Ref reduced{Workspace::kWorkOut, partial_bytes(g)};
  p.ops.push_back(ReduceScatterOp{
      {Workspace::kWorkOut}, reduced, g.out, count, 0, g.name + " sequential reduce-scatter"});
  p.ops.push_back(SumOp{{reduced}, g.out, count, bias(g), g.n, {Operand::kOut}, g.out, 0});
  return p;
}

}  // namespace

CollectiveGemm make_reduce_scatter_gemm(GemmGeometry& g) {
  require_sequence_layout(g);
  if (g.lhs_rows % g.tp != 0) {
    throw PlanError("GEMM '" + g.name + "': lhs rows " + std::to_string(g.lhs_rows) +
                    " do not split into tp=" + std::to_string(g.tp) + " chunks");
  }
  g.chunk_rows = g.lhs_rows / g.tp;
  // A transposed lhs [K/tp, B, S] (issue 43 item 1): a destination's rows are a column block
  // that the partial's GEMM reads with the lhs's leading dimension. Batch-first with a local
  // batch over 1 would need the tpsp-leading reorder of columns, which the sequential path
  // does not have (an FP8 lhs is quantized into its [M, K] copy first, so it is not this case).
  const Shape rows = lhs_rows_shape(g);
  if (g.lhs_transposed && g.need_reorder && rows[0] != 1) {
    throw Error("GEMM '" + g.name + "': a transposed lhs " + shape_str(g.lhs_local) +
                " runs with transpose_batch_sequence or a local batch of 1; batch-first with a " +
                "local batch of " + std::to_string(rows[0]) + " is not run");
  }
  place_strided_if_reordered(g, ReorderKind::kTpspLeading, rows);
  split_into_pieces(g);
  CollectiveGemm c;
  c.gemm_rows = g.lhs_rows;
  // Every offset the programs compute is below these checked totals: they cannot overflow.
  work_out_bytes(g);
  g.lhs_bytes();
  c.overlapped = overlapped(g);
  c.sequential = sequential(g);
  c.gemm_only.workspace.work_out = static_cast<int64_t>(work_out_bytes(g));
  c.gemm_only.ops.push_back(
      g.gemm(whole(g), g.lhs_src, {Workspace::kWorkOut}, std::nullopt, 0, g.name + " gemm"));
  c.collective_only.workspace.work_out = c.gemm_only.workspace.work_out;
  c.collective_only.ops.push_back(ReduceScatterOp{{Workspace::kWorkOut},
                                                  {Operand::kOut},
                                                  g.out,
                                                  g.chunk_rows * g.n,
                                                  0,
                                                  g.name + " reduce-scatter"});
  c.summary = std::to_string(g.tp) + " chunks of " + std::to_string(g.chunk_rows) + " rows" +
              (g.pieces > 1 ? " in " + std::to_string(g.pieces) + " pieces each" : "") + " in " +
              std::to_string(g.tp) + " steps on 1 stream(s), k=" + std::to_string(g.k) +
              ", n=" + std::to_string(g.n) +
              (g.strided ? ", strided placement for batch " + std::to_string(g.batch) : "");
  return c;
}

}  // namespace cgemm
