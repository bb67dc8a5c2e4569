#pragma once
// A collective GEMM kind (all-gather GEMM, reduce-scatter GEMM, plain GEMM): one file each in
// runtime/src/kinds/, saying only what differs: its chunk geometry, its buffers, its
// schedule and the work of each step, as the programs of a CollectiveGemm. The engine
// (engine.hpp) runs them; planning picks the kind from the table in collective_gemm.cpp, the
// first row whose predicate matches the GEMM's geometry (as choose_transports picks a
// transport). A new kind is a new file and a row in that table, above the rows it refines.

#include <optional>
#include <span>
#include <string>

#include "cgemm/core/collective_op.hpp"
#include "gemm_geometry.hpp"
#include "program/program.hpp"

namespace cgemm {

struct CollectiveGemm {
  Program overlapped;       // the collective overlapped with chunked GEMMs
  Program sequential;       // the collective, then the GEMM, or the GEMM, then the collective
  Program gemm_only;        // the benchmark's GEMM alone (the sequential path's GEMM)
  Program collective_only;  // the benchmark's collective alone
  // The two paths again, also writing the gathered lhs to Operand::kGatheredLhs (a call that
  // asks for it runs these); empty, with the reason in no_gathered_lhs, where the kind (or the
  // quantization) cannot hand it out.
  std::optional<Program> overlapped_gathering, sequential_gathering;
  Shape gathered_lhs;           // the gathered lhs's shape, where the kind hands it out
  std::string no_gathered_lhs;  // why not, as the error a call asking for it gets
  bool overlappable = true;     // false: nothing to overlap (both paths are one program)
  int fsdp = 1;                 // > 1: the rhs is gathered over that many fsdp ranks (FSDP)
  int64_t gemm_rows = 0;        // rows of all the GEMM work of one call (for FLOP counts)
  std::string summary;          // one line: chunks, steps, streams, placement
};

/// The programs GemmPlan::execute may run: both paths, and their gathering variants where the
/// kind has them. A plan prepares exactly these (Engine::prepare) and the memory check counts
/// exactly these (plan_bytes).
std::vector<const Program*> execute_programs(const CollectiveGemm& c);

/// Fills g's chunk geometry (throws PlanError / cgemm::Error naming the GEMM where the
/// layout does not split) and writes the kind's programs.
using CollectiveGemmFactory = CollectiveGemm (*)(GemmGeometry& g);

CollectiveGemm make_plain_gemm(GemmGeometry& g);
CollectiveGemm make_fsdp_reduce_scatter_gemm(GemmGeometry& g);
CollectiveGemm make_all_gather_gemm(GemmGeometry& g);
CollectiveGemm make_reduce_scatter_gemm(GemmGeometry& g);

/// The local lhs read as its rows: [B, S, K] (or [S, B, K]) with K the contracting dims
/// flattened, whether they follow the rows or (a transposed lhs [K..., B, S]) lead; {} where
/// the lhs has fewer than 3 dims.
Shape lhs_rows_shape(const GemmGeometry& g);

/// The checks every collective (all-gather or reduce-scatter) GEMM shares: activations
/// [B, S, K...] or, transposed, [K..., B, S] (lhs_rows_shape) and,
/// batch-first, the sequence in dim 1 (gemm.py asserts sequence_dim == 1). Throws naming g.name.
void require_sequence_layout(const GemmGeometry& g);

/// Batch-first activations with a local batch above 1 (gemm.py's need_reorder and B != 1): the
/// chunks are placed strided instead of reordered in a pass. Checks the reorder `kind` on
/// `shape` as gemm.py asserts it, then sets g.strided, batch, seq_total (the sequence rows of
/// `shape`) and seq_rows. Nothing happens otherwise.
void place_strided_if_reordered(GemmGeometry& g, ReorderKind kind, const Shape& shape);

/// chunks_per_rank (g.pieces) splits each chunk into pieces that are contiguous in its slot:
/// rows, or whole batch blocks when strided. Throws PlanError naming g.name when they do not
/// divide. Call after the chunk geometry is set (GemmPlan sets pieces to 1 at tp 1).
void split_into_pieces(const GemmGeometry& g);

/// A row of the kinds table: the kind's name, which geometries it runs, and its factory.
struct CollectiveGemmKind {
  const char* name;
  bool (*matches)(const GemmGeometry& g);
  CollectiveGemmFactory make;
};

/// The kinds table (collective_gemm.cpp), in order.
std::span<const CollectiveGemmKind> collective_gemm_kinds();

/// The first row of `kinds` that matches `g`. Throws cgemm::Error naming the GEMM and its
/// collective when none does.
const CollectiveGemmKind& choose_collective_gemm(
    const GemmGeometry& g, std::span<const CollectiveGemmKind> kinds = collective_gemm_kinds());

}  // namespace cgemm
