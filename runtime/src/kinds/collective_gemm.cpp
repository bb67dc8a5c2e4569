#include "collective_gemm.hpp"

#include <array>

namespace cgemm {

namespace {

// First match wins: a kind that refines another (say, an FP8 all-gather GEMM) goes above it.
constexpr std::array<CollectiveGemmKind, 4> kKinds{{
    {"all-gather GEMM",
     [](const GemmGeometry& g) { return g.collective == CollectiveOp::kAllGather; },
     make_all_gather_gemm},
    {"reduce-scatter GEMM",
     [](const GemmGeometry& g) { return g.collective == CollectiveOp::kReduceScatter; },
     make_reduce_scatter_gemm},
    {"fsdp reduce-scatter GEMM",
     [](const GemmGeometry& g) {
       return g.collective == CollectiveOp::kNone && g.fsdp_scatter != FsdpScatter::kNone;
     },
     make_fsdp_reduce_scatter_gemm},
    {"plain GEMM", [](const GemmGeometry& g) { return g.collective == CollectiveOp::kNone; },
     make_plain_gemm},
}};

}  // namespace

std::vector<const Program*> execute_programs(const CollectiveGemm& c) {
  std::vector<const Program*> out{&c.overlapped, &c.sequential};
  for (const std::optional<Program>* p : {&c.overlapped_gathering, &c.sequential_gathering}) {
    if (*p) out.push_back(&**p);
  }
  return out;
}

Shape lhs_rows_shape(const GemmGeometry& g) {
  const size_t nd = g.lhs_local.size();
  if (nd < 3) return {};
  if (!g.lhs_transposed) return {g.lhs_local[0], g.lhs_local[1], g.k};
  return {g.lhs_local[nd - 2], g.lhs_local[nd - 1], g.k};
}

void require_sequence_layout(const GemmGeometry& g) {
  const std::string where = "GEMM '" + g.name + "'";
  // [B, S] (or [S, B]) rows and the contracting dims: after them, or (a transposed lhs) before.
  const Shape rows = lhs_rows_shape(g);
  if (rows.empty() || rows[0] * rows[1] != g.lhs_rows) {
    throw Error(where + ": collective GEMMs take activations [B, S, K...] (or [S, B, K...]), " +
                "contracting the dims after the first two (the reduce-scatter also [K..., B, " +
                "S]); got a local lhs " + shape_str(g.lhs_local));
  }
  // gemm.py's impl: need_reorder = not transpose_batch_sequence and not is_outer; the reorder
  // is skipped when the batch dim is 1. Its assertions are the planner's.
  if (g.need_reorder && g.sequence_dim != 1) {
    throw PlanError(where + ": invalid sequence_dim " + std::to_string(g.sequence_dim) +
                    " for a batch-first collective GEMM (gemm.py asserts sequence_dim == 1)");
  }
}

void place_strided_if_reordered(GemmGeometry& g, ReorderKind kind, const Shape& shape) {
  if (!g.need_reorder || shape[0] == 1) return;
  check_reorder(kind, shape, g.dp, g.tp);
  g.strided = true;
  g.batch = shape[0];
  g.seq_total = shape[1];
  g.seq_rows = g.seq_total / g.tp;
}

void split_into_pieces(const GemmGeometry& g) {
  if (g.pieces == 1) return;
  const std::string where = "GEMM '" + g.name + "': chunks_per_rank " + std::to_string(g.pieces);
  if (g.pieces < 1) throw Error(where + " must be at least 1");
  if (g.strided && g.batch % g.pieces != 0) {
    throw PlanError(where + " does not divide the local batch " + std::to_string(g.batch) +
                    " (batch-first activations split a chunk by batch blocks)");
  }
  if (!g.strided && g.chunk_rows % g.pieces != 0) {
    throw PlanError(where + " does not divide a chunk's " + std::to_string(g.chunk_rows) + " rows");
  }
}

std::span<const CollectiveGemmKind> collective_gemm_kinds() { return kKinds; }

const CollectiveGemmKind& choose_collective_gemm(const GemmGeometry& g,
                                                 std::span<const CollectiveGemmKind> kinds) {
  for (const CollectiveGemmKind& kind : kinds) {
    if (kind.matches(g)) return kind;
  }
  throw Error("GEMM '" + g.name + "': no collective GEMM runs collective '" +
              std::string(collective_name(g.collective)) + "' with " +
              std::string(dtype_name(g.in)) + " inputs");
}

}  // namespace cgemm
