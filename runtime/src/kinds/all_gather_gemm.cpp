// All-gather GEMM (column-parallel layer, sequence-parallel input): x [B, S/tp, K] on each
// rank, w [K, N/tp]; out [B, S, N/tp]. Chunk c is rank c's lhs shard; the ring of
// schedule.hpp brings the chunks in while the GEMM of the chunk in hand runs, each chunk on
// the next compute stream, and writes each chunk's rows straight to its place in the output
// (strided over the batch for batch-first activations: no reorder pass).
//
// A call may also ask for the gathered lhs (Operand::kGatheredLhs, what the wgrad of a
// tensor-parallel layer reads): the overlapped path copies each chunk (each piece) there on
// its compute stream after that piece's GEMM, from where the ring left it, so it takes no
// second collective; the sequential path gathers into it directly where rank-major order is
// sequence order, and reorders its gathered workspace into it otherwise.

#include <algorithm>
#include <vector>

#include "cgemm/runtime/schedule.hpp"
#include "collective_gemm.hpp"

namespace cgemm {

namespace {

// The bias, fused in the epilogue of every GEMM that writes output rows, when gemm.py fuses it.
std::optional<Ref> bias(const GemmGeometry& g) {
  return g.fuse_bias ? std::optional<Ref>(Ref{Operand::kBias}) : std::nullopt;
}

// What travels the ring with every chunk: its lhs rows, moved in pieces with chunks_per_rank,
// then each side-band tensor of the geometry, moved whole with the first piece (exchanges run
// in start order, so every piece's GEMM finds it arrived). Each payload has tp slots in the
// ring, one per chunk; chunk c lives at slot c on every rank.
struct Payload {
  std::string name;  // "" for the lhs rows; the side band's name otherwise
  Ref source;        // this rank's chunk
  size_t chunk_bytes = 0;
  size_t ring_at = 0;  // where its slots start in the ring
  bool in_pieces = false;
  bool lhs_block_scale = false;  // the chunk's lhs block scales (SideBand::lhs_block_scale)

  Ref chunk(const GemmGeometry& g, int c) const {
    if (c == g.me) return source;
    return {Workspace::kRing, ring_at + static_cast<size_t>(c) * chunk_bytes};
  }
};

std::vector<Payload> payloads(const GemmGeometry& g) {
  std::vector<Payload> list{{"", g.lhs_src, g.chunk_lhs_bytes(), 0, true}};
  int64_t ring = static_cast<int64_t>(g.times(g.chunk_lhs_bytes(), g.tp, "ring"));
  for (const SideBand& s : g.lhs_side_band) {
    list.push_back(
        {s.name, s.source, s.bytes, static_cast<size_t>(ring), false, s.lhs_block_scale});
    ring = checked_add(ring, static_cast<int64_t>(g.times(s.bytes, g.tp, "ring")),
                       "GEMM '" + g.name + "' ring");
  }
  return list;
}

// The ring holds every payload's tp slots, one payload after another.
size_t ring_bytes(const GemmGeometry& g, const std::vector<Payload>& list) {
  return list.back().ring_at + g.times(list.back().chunk_bytes, g.tp, "ring");
}

// Where chunk c's lhs block scales are (quantized with block scaling), or nullopt.
std::optional<Ref> chunk_scales(const GemmGeometry& g, const std::vector<Payload>& list, int c) {
  for (const Payload& pl : list) {
    if (pl.lhs_block_scale) return pl.chunk(g, c);
  }
  return std::nullopt;
}

// Where it writes: rows c*S/tp.. of every batch block (strided) or the c-th block of rows.
Ref chunk_out(const GemmGeometry& g, int c) {
  const int64_t row = g.strided ? c * g.seq_rows : c * g.chunk_rows;
  return {Operand::kOut, static_cast<size_t>(row * g.n) * g.out_size()};
}

// The transfers of piece j of one ring step: every payload's share of it, for each chunk the
// step moves.
std::vector<Transfer> piece_transfers(const GemmGeometry& g, const std::vector<Payload>& list,
                                      const AllGatherStep& step, int j,
                                      const std::string& step_name) {
  std::vector<Transfer> out;
  const std::string piece = g.pieces > 1 ? " piece " + std::to_string(j) : "";
  for (const ChunkTransfer& tr : step.transfers) {
    for (const Payload& pl : list) {
      if (!pl.in_pieces && j > 0) continue;
      const size_t bytes =
          pl.in_pieces ? pl.chunk_bytes / static_cast<size_t>(g.pieces) : pl.chunk_bytes;
      const size_t at = pl.in_pieces ? static_cast<size_t>(j) * bytes : 0;
      const auto slot = [&](int c) {
        return pl.ring_at + static_cast<size_t>(c) * pl.chunk_bytes + at;
      };
      out.push_back({pl.chunk(g, tr.send_chunk).plus(at), bytes, tr.send_peer, slot(tr.send_chunk),
                     tr.recv_peer, slot(tr.recv_chunk),
                     step_name + "chunk " + std::to_string(tr.send_chunk) + piece +
                         (pl.name.empty() ? "" : " " + pl.name) + " -> rank " +
                         std::to_string(tr.send_peer)});
    }
  }
  return out;
}

// The copy of piece j of chunk c (at `src`) to its place in the gathered lhs, in sequence
// order: the c-th block of rows, or (strided) rows c S/tp.. of each of the piece's batch blocks.
CopyOp hand_out(const GemmGeometry& g, Ref src, int c, int j, int stream) {
  const size_t row = g.bytes(1, g.k, g.in_size(), "lhs row");
  CopyOp o;
  o.src = src;
  o.stream = stream;
  o.label = g.name + " gathered lhs chunk " + std::to_string(c) +
            (g.pieces > 1 ? " piece " + std::to_string(j) : "");
  if (g.strided) {
    const int64_t blocks = g.batch / g.pieces;
    o.bytes = static_cast<size_t>(g.seq_rows) * row;
    o.count = blocks;
    o.src_stride = o.bytes;
    o.dst_stride = static_cast<size_t>(g.seq_total) * row;
    o.dst = {Operand::kGatheredLhs,
             static_cast<size_t>(j * blocks * g.seq_total + c * g.seq_rows) * row};
  } else {
    o.bytes = g.piece_lhs_bytes();
    o.dst = {Operand::kGatheredLhs,
             static_cast<size_t>(c) * g.chunk_lhs_bytes() + static_cast<size_t>(j) * o.bytes};
  }
  return o;
}

// With chunks_per_rank > 1 every chunk moves and multiplies in pieces: piece j of a chunk goes
// on in its own exchange, and its GEMM waits only for that exchange, so the next step's first
// GEMM starts after a piece has arrived rather than the whole chunk. `gathering`: each piece
// is also copied to the gathered lhs, behind its GEMM on the same stream (which has waited
// for the piece's exchange).
Program overlapped(const GemmGeometry& g, bool gathering) {
  Program p;
  const std::vector<Payload> list = payloads(g);
  p.workspace.ring = g.tp > 1 ? static_cast<int64_t>(ring_bytes(g, list)) : 0;
  p.ops.push_back(ForkOp{});
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
      x.transfers = piece_transfers(g, list, step, j, step_name);
      x.token = previous[static_cast<size_t>(j)] = p.tokens++;
      p.ops.push_back(std::move(x));
    }
    for (int c : step.compute) {
      for (int j = 0; j < g.pieces; ++j) {
        const int s = gemm_index++ % g.num_streams;
        const int token = arrived[static_cast<size_t>(j)];
        if (c != g.me && token >= 0) p.ops.push_back(WaitOp{token, s});
        const size_t at = static_cast<size_t>(j) * piece_lhs;
        const Ref lhs = list.front().chunk(g, c).plus(at);
        p.ops.push_back(g.gemm(g.piece_task(g.seq_rows * g.k, g.seq_total * g.n), lhs,
                               chunk_out(g, c).plus(static_cast<size_t>(j) * piece_out), bias(g), s,
                               g.name + " gemm chunk " + std::to_string(c) +
                                   (g.pieces > 1 ? " piece " + std::to_string(j) : ""),
                               at, chunk_scales(g, list, c)));
        if (gathering) p.ops.push_back(hand_out(g, lhs, c, j, s));
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

// The sequential path's all-gathers into kWorkIn, rank-major: every rank's lhs, then each
// side band behind it (where a GEMM of this path finds them: work_in_bytes covers both).
std::vector<AllGatherOp> gathers(const GemmGeometry& g) {
  std::vector<AllGatherOp> out{
      {g.lhs_src, {Workspace::kWorkIn}, g.lhs_bytes(), 0, g.name + " sequential all-gather"}};
  size_t at = g.times(g.lhs_bytes(), g.tp, "gathered lhs");
  for (const SideBand& s : g.lhs_side_band) {
    out.push_back({{s.source},
                   {Workspace::kWorkIn, at},
                   s.bytes,
                   0,
                   g.name + " sequential all-gather " + s.name});
    at += g.times(s.bytes, g.tp, "gathered side band");
  }
  return out;
}

// The gathered lhs block scales (behind the gathered lhs, rank-major as its rows), or nullopt.
std::optional<Ref> gathered_scales(const GemmGeometry& g) {
  size_t at = g.times(g.lhs_bytes(), g.tp, "gathered lhs");
  for (const SideBand& s : g.lhs_side_band) {
    if (s.lhs_block_scale) return Ref{Workspace::kWorkIn, at};
    at += g.times(s.bytes, g.tp, "gathered side band");
  }
  return std::nullopt;
}

int64_t work_in_bytes(const GemmGeometry& g) {
  int64_t bytes = static_cast<int64_t>(g.times(g.lhs_bytes(), g.tp, "gathered lhs"));
  for (const SideBand& s : g.lhs_side_band) {
    bytes = checked_add(bytes, static_cast<int64_t>(g.times(s.bytes, g.tp, "gathered side band")),
                        "GEMM '" + g.name + "' gathered lhs");
  }
  return bytes;
}

// The gathered lhs in sequence order: this rank's shard, its sequence dim (batch-first: 1;
// otherwise the rows, dim 0) times tp.
Shape gathered_lhs_shape(const GemmGeometry& g) {
  Shape s = g.lhs_local;
  const size_t seq = g.need_reorder ? 1 : 0;
  s[seq] = checked_mul(s[seq], g.tp, "GEMM '" + g.name + "' gathered lhs");
  return s;
}

// `gathering`: the gathered lhs also goes to the caller's Operand::kGatheredLhs. Where
// rank-major order is sequence order (not strided) the all-gather lands there and the GEMM
// reads it from there; otherwise the gathered workspace is reordered into it (the dp-leading
// reorder of one dp rank's shards, dp 1, as ActivationGather applies it).
Program sequential(const GemmGeometry& g, bool gathering) {
  Program p;
  const bool direct = gathering && !g.strided;
  p.workspace.work_in = direct ? 0 : work_in_bytes(g);
  for (AllGatherOp& x : gathers(g)) {
    if (direct) x.dst = {Operand::kGatheredLhs};
    p.ops.push_back(std::move(x));
  }
  if (gathering && g.strided) {
    p.ops.push_back(ReorderOp{ReorderKind::kDpLeading,
                              gathered_lhs_shape(g),
                              1,
                              {Workspace::kWorkIn},
                              {Operand::kGatheredLhs},
                              g.in,
                              0});
  }
  const std::string label = g.name + " gemm";
  const Ref gathered = direct ? Ref{Operand::kGatheredLhs} : Ref{Workspace::kWorkIn};
  if (g.strided) {
    p.workspace.work_out =
        static_cast<int64_t>(g.bytes(c_rows(g), g.n, g.out_size(), "gathered output"));
    p.ops.push_back(g.gemm(whole(g), gathered, {Workspace::kWorkOut}, bias(g), 0, label, 0,
                           gathered_scales(g)));
    p.ops.push_back(ReorderOp{ReorderKind::kDpLeading,
                              g.out_local,
                              g.dp,
                              {Workspace::kWorkOut},
                              {Operand::kOut},
                              g.out,
                              0});
  } else {
    p.ops.push_back(
        g.gemm(whole(g), gathered, {Operand::kOut}, bias(g), 0, label, 0, gathered_scales(g)));
  }
  return p;
}

// Issue 43 item 2: an output the planner reduces over an axis besides tp's (both contracting
// dims sharded over dp, say). gemm.py's _sharded_impl psums the GEMM's output over it, cast to
// float32 first and back after (is_all_reduce_in_float32, the default), then adds the bias in
// the output dtype; so does the end of every path here, after the gathered GEMMs have written
// the output: the same roundings, in the same order.
void reduce_output(Program& p, const GemmGeometry& g) {
  if (g.reduce_groups.empty()) return;
  const int64_t count = checked_mul(c_rows(g), g.n, "GEMM '" + g.name + "' output");
  const Ref out{Operand::kOut};
  const std::optional<Ref> bias =
      g.has_bias ? std::optional<Ref>(Ref{Operand::kBias}) : std::nullopt;
  const bool fp32 = g.reduce_in_fp32 && g.out != DType::kFloat32;
  Ref sum = out;
  if (fp32) {
    sum = {Workspace::kWorkOut, static_cast<size_t>(p.workspace.work_out)};
    p.workspace.work_out = checked_add(
        p.workspace.work_out,
        static_cast<int64_t>(g.bytes(c_rows(g), g.n, dtype_size(DType::kFloat32), "fp32 sum")),
        "GEMM '" + g.name + "' workspace");
    p.ops.push_back(SumOp{{out}, g.out, count, std::nullopt, 0, sum, DType::kFloat32, 0});
  }
  const DType sum_dtype = fp32 ? DType::kFloat32 : g.out;
  for (const Group group : g.reduce_groups) {
    p.ops.push_back(AllReduceOp{sum, sum_dtype, count, 0,
                                g.name + " all-reduce over " + group_name(group), group});
  }
  // SumOp rounds the sum to the output dtype before it adds the bias (program.hpp).
  if (fp32 || bias) p.ops.push_back(SumOp{{sum}, sum_dtype, count, bias, g.n, out, g.out, 0});
}

}  // namespace

CollectiveGemm make_all_gather_gemm(GemmGeometry& g) {
  require_sequence_layout(g);
  if (!g.reduce_axis.empty() && g.reduce_groups.empty()) {
    throw Error("GEMM '" + g.name + "': the output is reduced over " + g.reduce_axis +
                "; the all-gather GEMM all-reduces over the data-parallel axis only (and, on a " +
                "mesh with an fsdp axis, over fsdp or ('dp', 'fsdp'))");
  }
  g.chunk_rows = g.lhs_rows;
  place_strided_if_reordered(g, ReorderKind::kDpLeading, g.out_local);
  split_into_pieces(g);
  CollectiveGemm c;
  // Every offset the programs compute is below these checked totals: they cannot overflow.
  c.gemm_rows = c_rows(g);
  g.bytes(c.gemm_rows, g.n, g.out_size(), "gathered output");
  g.bytes(c.gemm_rows, g.k, g.in_size(), "gathered lhs");
  c.overlapped = overlapped(g, false);
  c.sequential = sequential(g, false);
  reduce_output(c.overlapped, g);
  reduce_output(c.sequential, g);
  if (g.lhs_src.buf == Ref{Operand::kLhs}.buf && g.lhs_side_band.empty()) {
    c.overlapped_gathering = overlapped(g, true);
    c.sequential_gathering = sequential(g, true);
    reduce_output(*c.overlapped_gathering, g);
    reduce_output(*c.sequential_gathering, g);
    c.gathered_lhs = gathered_lhs_shape(g);
  } else {
    // The ring and the sequential gather move the plan's quantized copy of the lhs (and its
    // scales), not the caller's tensor: nothing of the caller's dtype is gathered to hand out.
    c.no_gathered_lhs = "GEMM '" + g.name +
                        "' quantizes its lhs, so it gathers the quantized copy and hands out no "
                        "gathered_lhs; gather the lhs with an ActivationGather instead";
  }
  c.gemm_only.workspace.work_in = work_in_bytes(g);
  c.gemm_only.ops.push_back(g.gemm(whole(g), {Workspace::kWorkIn}, {Operand::kOut}, std::nullopt, 0,
                                   g.name + " gemm", 0, gathered_scales(g)));
  c.collective_only.workspace.work_in = c.gemm_only.workspace.work_in;
  for (AllGatherOp& x : gathers(g)) c.collective_only.ops.push_back(std::move(x));
  for (const Group group : g.reduce_groups) {  // the reduction's all-reduce, in the output dtype
    c.collective_only.ops.push_back(AllReduceOp{{Operand::kOut},
                                                g.out,
                                                checked_mul(c_rows(g), g.n, "output"),
                                                0,
                                                g.name + " all-reduce over " + group_name(group),
                                                group});
  }
  const auto steps = all_gather_schedule(g.tp, g.me, g.aggregate).size();
  c.summary = std::to_string(g.tp) + " chunks of " + std::to_string(g.chunk_rows) + " rows" +
              (g.pieces > 1 ? " in " + std::to_string(g.pieces) + " pieces each" : "") + " in " +
              std::to_string(steps) + " steps on " + std::to_string(g.num_streams) +
              " stream(s), k=" + std::to_string(g.k) + ", n=" + std::to_string(g.n) +
              (g.strided ? ", strided placement for batch " + std::to_string(g.batch) : "") +
              (g.aggregate ? ", aggregate" : "") +
              (g.reduce_axis.empty() ? "" : ", then an all-reduce over " + g.reduce_axis);
  return c;
}

}  // namespace cgemm
