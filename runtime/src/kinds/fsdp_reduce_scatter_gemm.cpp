// FSDP's weight gradient: a plain GEMM whose output the planner reduces over the fsdp axis
// (both contracting dims sharded over it: dW = x^T dy over the tokens of the fsdp group), its
// sum reduce-scattered over the fsdp group instead of all-reduced, so each rank ends with the
// block of dW its weight shard is (GemmDesc::fsdp_scatter_dim; docs/FSDP.md). Blocks are the
// output's rows (dW [K, N] by K: the column-parallel weight's shards) or its columns (by N: the
// row-parallel weight's), f of them for f fsdp ranks.
//
// Overlapped: the GEMM of each other rank's block first, each on the next stream, into a send
// slot, and that block leaves for its rank right after its GEMM (step s: the block of rank
// me + s; rank me - s's partial of this rank's block arrives in the fsdp ring); this rank's own
// partial last, into its own ring slot. Then the f partials are summed in fp32 in rank order:
// bit-repeatable from run to run. A bias is added after the sum (gemm.py adds it to the reduced
// output). Sequential: the same f block GEMMs into the work buffer, then one reduce-scatter over
// the fsdp group (the CPU backend's and the copy engines' sum as the overlapped path does, in
// rank order; NCCL's in its own), then the bias. Both paths keep the blocks in the fsdp ring;
// the overlapped one also has f - 1 send slots of its own.

#include <string>

#include "collective_gemm.hpp"

namespace cgemm {

namespace {

struct Blocks {
  int64_t rows = 0, cols = 0;  // of one block, [rows, cols], packed
  size_t bytes = 0;
};

Blocks blocks(const GemmGeometry& g) {
  Blocks b;
  const bool by_rows = g.fsdp_scatter == FsdpScatter::kRows;
  b.rows = by_rows ? g.lhs_rows / g.fsdp : g.lhs_rows;
  b.cols = by_rows ? g.n : g.n / g.fsdp;
  b.bytes = g.bytes(b.rows, b.cols, g.out_size(), "fsdp block");
  return b;
}

// The GEMM of block j, written packed at `out`.
GemmOp block_gemm(const GemmGeometry& g, const Blocks& b, int j, Ref out, int stream) {
  GemmTask t = g.task();
  t.m = b.rows;
  t.n = b.cols;
  t.ldc = b.cols;
  Ref lhs = g.lhs_src, rhs = g.rhs_src;
  const auto j64 = static_cast<int64_t>(j);
  if (g.fsdp_scatter == FsdpScatter::kRows) {
    // Rows j of the output: lhs rows j ([M, K] stored) or lhs columns j ([K, M] stored, lda M).
    const int64_t at = g.lhs_transposed ? j64 * b.rows : j64 * b.rows * g.k;
    lhs = lhs.plus(static_cast<size_t>(at) * g.in_size());
  } else {
    // Columns j: rhs columns j ([K, N] stored, ldb N) or rows j ([N, K] stored).
    const int64_t at = g.rhs_transposed ? j64 * b.cols * g.k : j64 * b.cols;
    rhs = rhs.plus(static_cast<size_t>(at) * g.in_size());
  }
  GemmOp o = g.gemm(t, lhs, out, std::nullopt, stream,
                    g.name + " gemm block " + std::to_string(j) + " of the fsdp reduce-scatter");
  o.rhs = rhs;
  return o;
}

// After the sum over the fsdp group: the sum over the replicas where the planner reduces over
// (dp, fsdp) (HSDP), then the bias, which gemm.py adds after the whole reduction: to this rank's
// block (its columns' bias when the blocks are columns), in the output dtype.
void finish(const GemmGeometry& g, const Blocks& b, Program& p) {
  const int64_t count = b.rows * b.cols;
  if (g.fsdp_scatter_dp_sum) {
    p.ops.push_back(AllReduceOp{
        {Operand::kOut}, g.out, count, 0, g.name + " all-reduce over the replicas", Group::kDp});
  }
  if (!g.has_bias) return;
  const size_t at =
      g.fsdp_scatter == FsdpScatter::kColumns
          ? static_cast<size_t>(g.fsdp_rank) * static_cast<size_t>(b.cols) * g.out_size()
          : 0;
  p.ops.push_back(SumOp{
      {{Operand::kOut}}, g.out, count, Ref{Operand::kBias, at}, b.cols, {Operand::kOut}, g.out, 0});
}

Program overlapped(const GemmGeometry& g, const Blocks& b) {
  Program p;
  p.workspace.fsdp_ring = static_cast<int64_t>(g.times(b.bytes, g.fsdp, "fsdp ring"));
  p.workspace.send = static_cast<int64_t>(g.times(b.bytes, g.fsdp - 1, "send"));
  const auto slot = [&](int j) {
    return Ref{Workspace::kFsdpRing, static_cast<size_t>(j) * b.bytes};
  };
  p.ops.push_back(ForkOp{});
  for (int s = 1; s < g.fsdp; ++s) {
    const int to = (g.fsdp_rank + s) % g.fsdp, from = (g.fsdp_rank - s + g.fsdp) % g.fsdp;
    const int stream = (s - 1) % g.num_streams;
    const Ref send{Workspace::kSend, static_cast<size_t>(s - 1) * b.bytes};
    p.ops.push_back(block_gemm(g, b, to, send, stream));
    ExchangeOp x;
    x.transfers.push_back({send, b.bytes, to, slot(g.fsdp_rank).offset, from, slot(from).offset,
                           g.name + " fsdp step " + std::to_string(s) + ": block " +
                               std::to_string(to) + " -> fsdp rank " + std::to_string(to)});
    x.after_stream = stream;
    x.token = p.tokens++;
    x.group = Group::kFsdp;
    x.ring = Workspace::kFsdpRing;
    p.ops.push_back(std::move(x));
  }
  p.ops.push_back(block_gemm(g, b, g.fsdp_rank, slot(g.fsdp_rank), (g.fsdp - 1) % g.num_streams));
  // The exchanges finish in start order: the last one's token covers them all.
  p.ops.push_back(WaitOp{p.tokens - 1, 0});
  p.ops.push_back(JoinOp{0});
  std::vector<Ref> parts;
  for (int j = 0; j < g.fsdp; ++j) parts.push_back(slot(j));
  p.ops.push_back(SumOp{parts, g.out, b.rows * b.cols, std::nullopt, 0, {Operand::kOut}, g.out, 0});
  finish(g, b, p);
  return p;
}

// The f block GEMMs, packed rank-major (what the reduce-scatter takes) in the fsdp ring: the
// context's shared buffer (program/shared_ring.hpp), of the size the overlapped path's slots
// take, rather than a whole dW of the plan's own. No peer writes it on this path (the backend's
// reduce-scatter stages through its own buffers).
void all_blocks(const GemmGeometry& g, const Blocks& b, Program& p) {
  p.workspace.fsdp_ring = static_cast<int64_t>(g.times(b.bytes, g.fsdp, "fsdp blocks"));
  for (int j = 0; j < g.fsdp; ++j) {
    p.ops.push_back(
        block_gemm(g, b, j, {Workspace::kFsdpRing, static_cast<size_t>(j) * b.bytes}, 0));
  }
}

ReduceScatterOp scatter(const GemmGeometry& g, const Blocks& b) {
  return {{Workspace::kFsdpRing},          {Operand::kOut}, g.out, b.rows * b.cols, 0,
          g.name + " fsdp reduce-scatter", Group::kFsdp};
}

}  // namespace

CollectiveGemm make_fsdp_reduce_scatter_gemm(GemmGeometry& g) {
  const std::string where = "GEMM '" + g.name + "'";
  if (g.fsdp < 2) {
    throw Error(where + ": a reduce-scatter over fsdp=" + std::to_string(g.fsdp) +
                " (an internal error: planning refuses it without an fsdp axis)");
  }
  const bool by_rows = g.fsdp_scatter == FsdpScatter::kRows;
  if ((by_rows ? g.lhs_rows : g.n) % g.fsdp != 0) {
    throw PlanError(where + ": the output's " + (by_rows ? "rows " : "columns ") +
                    std::to_string(by_rows ? g.lhs_rows : g.n) +
                    " do not divide into fsdp=" + std::to_string(g.fsdp) + " blocks");
  }
  g.chunk_rows = g.lhs_rows;
  const Blocks b = blocks(g);
  CollectiveGemm c;
  c.overlappable = false;
  c.fsdp = g.fsdp;
  c.gemm_rows = g.lhs_rows;
  c.overlapped = overlapped(g, b);
  all_blocks(g, b, c.sequential);
  c.sequential.ops.push_back(scatter(g, b));
  finish(g, b, c.sequential);
  all_blocks(g, b, c.gemm_only);
  c.collective_only.workspace.fsdp_ring = c.gemm_only.workspace.fsdp_ring;
  c.collective_only.ops.push_back(scatter(g, b));
  c.summary = "fsdp reduce-scatter GEMM: " + std::to_string(g.fsdp) + " blocks of [" +
              std::to_string(b.rows) + " x " + std::to_string(b.cols) + "] (the output's " +
              (by_rows ? "rows" : "columns") + "), k=" + std::to_string(g.k) +
              ", summed in rank order in fp32 on " + std::to_string(g.num_streams) + " stream(s)" +
              (g.fsdp_scatter_dp_sum ? ", then all-reduced over dp" : "");
  return c;
}

}  // namespace cgemm
