// A bench case's chunk GEMMs, read from the programs the runtime plans for it (plan_gemm's
// read-only ProgramView, rank 0 of the TP group), so --parts times exactly what execute()
// would run. Offsets map onto --parts' buffers as they are: the all-gather's chunks read the
// ring's tp slots (rank 0's own chunk, in its lhs, is slot 0) and the reduce-scatter's partials
// go to the send slots (rank 0's own, in its ring, is slot 0).

#include <initializer_list>
#include <string>
#include <utility>

#include "cgemm/core/error.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

constexpr int64_t kBf16 = 2;  // --parts runs bf16

// The local GEMM's hidden sizes of a case for a collective.
std::pair<int64_t, int64_t> hidden(const BenchShape& sh, CollectiveOp op) {
  if (op == CollectiveOp::kAllGather) return {sh.ag_in, sh.ag_out};
  return {sh.rs_in, sh.rs_out};
}

PlanDescription plan(const BenchShape& sh, CollectiveOp op, int tp, int chunks_per_rank) {
  PlanningMesh m;
  m.tp = tp;
  const auto [in, out] = hidden(sh, op);
  PlanningOptions opt;
  opt.overlap.chunks_per_rank = chunks_per_rank;
  return plan_gemm(tensor_sequence_parallel_gemm(m, sh.name, op, sh.batch, sh.seq, in, out,
                                                 DType::kBFloat16, false, false),
                   m, opt);
}

// Where a chunk GEMM's operand lies in --parts' buffers, in elements: the offset as planned,
// in one of the buffers that map onto --parts' (any other means the schedule changed shape
// and this mapping must follow it).
int64_t elements(const std::string& buffer, int64_t offset, std::initializer_list<const char*> maps,
                 const std::string& where) {
  for (const char* m : maps) {
    if (buffer == m) return offset / kBf16;
  }
  throw Error(where + ": a chunk GEMM uses the plan's '" + buffer +
              "' buffer, which --parts does not map");
}

}  // namespace

std::string why_not_split(const BenchShape& sh, CollectiveOp op, int tp, int chunks_per_rank) {
  if (op != CollectiveOp::kAllGather && op != CollectiveOp::kReduceScatter) {
    return "only all_gather and reduce_scatter GEMMs are chunked";
  }
  if (tp < 1 || chunks_per_rank < 1) return "tp and chunks per rank must be >= 1";
  // The runtime takes one piece at tp 1 (plan_gemm ignores chunks_per_rank there).
  if (tp == 1 && chunks_per_rank > 1) return "tp 1 has no ring to split";
  try {
    plan(sh, op, tp, chunks_per_rank);
  } catch (const Error& e) {
    return e.what();
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
  const PlanDescription d = plan(shape, op, tp, chunks_per_rank);
  const bool ag = op == CollectiveOp::kAllGather;
  const std::string where = "--parts: case '" + shape.name + "'";
  if (d.sequential.gemms.size() != 1) {
    throw Error(where + ": the sequential path has " + std::to_string(d.sequential.gemms.size()) +
                " GEMMs, not one whole GEMM");
  }
  ChunkedGemm g;
  g.whole = d.sequential.gemms.front().task;
  g.whole.bias = nullptr;
  // The ring holds tp chunks (all-gather) or partials (reduce-scatter); tp 1 has none, and its
  // one GEMM reads the lhs and writes the output.
  const int64_t ring = d.bytes.overlapped.ring / kBf16;
  g.lhs_elems = ag && tp > 1 ? ring : d.bytes.lhs / kBf16;
  g.rhs_elems = d.bytes.rhs / kBf16;
  g.out_elems = !ag && tp > 1 ? ring : d.bytes.out / kBf16;
  g.step_lhs_elems = g.lhs_elems / tp;
  g.step_out_elems = g.out_elems / tp;
  for (const ProgramGemm& pg : d.overlapped.gemms) {
    if (pg.rhs_buffer != "rhs" || pg.rhs_offset != 0) {
      throw Error(where + ": a chunk GEMM reads its rhs from the plan's '" + pg.rhs_buffer +
                  "', which --parts does not map");
    }
    g.chunks.push_back({pg.task,
                        elements(pg.lhs_buffer, pg.lhs_offset,
                                 ag ? std::initializer_list<const char*>{"lhs", "ring"}
                                    : std::initializer_list<const char*>{"lhs"},
                                 where),
                        elements(pg.out_buffer, pg.out_offset,
                                 ag ? std::initializer_list<const char*>{"out"}
                                    : std::initializer_list<const char*>{"send", "ring", "out"},
                                 where)});
  }
  if (g.chunks.size() != static_cast<size_t>(tp * chunks_per_rank)) {
    throw Error(where + ": the overlapped program has " + std::to_string(g.chunks.size()) +
                " GEMMs, expected " + std::to_string(tp * chunks_per_rank));
  }
  return g;
}

}  // namespace cgemm::launcher::parts
