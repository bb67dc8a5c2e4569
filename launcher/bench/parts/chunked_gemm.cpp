// A bench case's chunk GEMMs, read from the programs the runtime plans for it (plan_gemm's
// read-only ProgramView, rank 0 of the TP group), so --parts times exactly what execute()
// would run. Offsets map onto --parts' buffers as they are: the all-gather's chunks read the
// ring's tp slots (rank 0's own chunk, in its lhs, is slot 0) and the reduce-scatter's partials
// go to the send slots (rank 0's own, in its ring, is slot 0). A quantized GEMM's chunks read
// the plan's quantized copies ("quant": the lhs at its start, then the rhs [N, K]; the
// all-gather's ring then holds FP8 chunks), which map onto --parts' lhs and rhs as they are.

#include <initializer_list>
#include <string>
#include <utility>

#include "cgemm/core/error.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "cgemm/sharding/scaling_mode.hpp"
#include "common/quantization_options.hpp"
#include "parts.hpp"

namespace cgemm::launcher::parts {

namespace {

constexpr int64_t kBf16 = 2;  // --parts' operands before quantization, and its outputs

// The local GEMM's hidden sizes of a case for a collective.
std::pair<int64_t, int64_t> hidden(const BenchShape& sh, CollectiveOp op) {
  if (op == CollectiveOp::kAllGather) return {sh.ag_in, sh.ag_out};
  return {sh.rs_in, sh.rs_out};
}

PlanDescription plan(const BenchShape& sh, CollectiveOp op, int tp, int chunks_per_rank,
                     const QuantizationDesc& q) {
  PlanningMesh m;
  m.tp = tp;
  const auto [in, out] = hidden(sh, op);
  PlanningOptions opt;
  opt.overlap.chunks_per_rank = chunks_per_rank;
  GemmDesc desc = tensor_sequence_parallel_gemm(m, sh.name, op, sh.batch, sh.seq, in, out,
                                                DType::kBFloat16, false, false);
  desc.quantization = q;
  return plan_gemm(desc, m, opt);
}

// Where a chunk GEMM's operand lies in --parts' buffers, in elements of `size` bytes: the
// offset as planned, in one of the buffers that map onto --parts' (any other means the
// schedule changed shape and this mapping must follow it).
int64_t elements(const std::string& buffer, int64_t offset, int64_t size,
                 std::initializer_list<const char*> maps, const std::string& where) {
  for (const char* m : maps) {
    if (buffer == m) return offset / size;
  }
  throw Error(where + ": a chunk GEMM uses the plan's '" + buffer +
              "' buffer, which --parts does not map");
}

}  // namespace

std::string why_not_split(const BenchShape& sh, CollectiveOp op, int tp, int chunks_per_rank,
                          const QuantizationDesc& q) {
  if (op != CollectiveOp::kAllGather && op != CollectiveOp::kReduceScatter) {
    return "only all_gather and reduce_scatter GEMMs are chunked";
  }
  if (tp < 1 || chunks_per_rank < 1) return "tp and chunks per rank must be >= 1";
  // The runtime takes one piece at tp 1 (plan_gemm ignores chunks_per_rank there).
  if (tp == 1 && chunks_per_rank > 1) return "tp 1 has no ring to split";
  if (!is_tensor_scaling(q.mode) && q.mode != ScalingMode::kNoScaling) {
    return "--parts times per-tensor FP8 (scaling delayed or current), not " +
           scaling_option_name(q.mode);
  }
  try {
    plan(sh, op, tp, chunks_per_rank, q);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool splits(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank,
            const QuantizationDesc& q) {
  return why_not_split(shape, op, tp, chunks_per_rank, q).empty();
}

std::string chunk_dtype(const QuantizationDesc& q) {
  if (q.mode == ScalingMode::kNoScaling) return "bf16";
  const auto name = [](DType t) { return t == DType::kFloat8E5M2 ? "e5m2" : "e4m3"; };
  return std::string(name(q.lhs_format)) + " x " + name(q.rhs_format);
}

ChunkedGemm chunked_gemm(const BenchShape& shape, CollectiveOp op, int tp, int chunks_per_rank,
                         const QuantizationDesc& q) {
  if (const std::string why = why_not_split(shape, op, tp, chunks_per_rank, q); !why.empty()) {
    throw Error("case '" + shape.name + "' " + std::string(collective_name(op)) + " at tp " +
                std::to_string(tp) + " with " + std::to_string(chunks_per_rank) +
                " chunk(s) per rank: " + why);
  }
  const PlanDescription d = plan(shape, op, tp, chunks_per_rank, q);
  const bool ag = op == CollectiveOp::kAllGather;
  const std::string where = "--parts: case '" + shape.name + "'";
  if (d.sequential.gemms.size() != 1) {
    throw Error(where + ": the sequential path has " + std::to_string(d.sequential.gemms.size()) +
                " GEMMs, not one whole GEMM");
  }
  ChunkedGemm g;
  g.whole = d.sequential.gemms.front().task;
  g.whole.bias = nullptr;
  const bool quantized = g.whole.quantized();
  const auto in_size = static_cast<int64_t>(dtype_size(g.whole.in_dtype));
  const auto out_size = static_cast<int64_t>(dtype_size(g.whole.out_dtype));
  // The ring holds tp chunks (all-gather, in the GEMM's lhs dtype) or partials (reduce-scatter,
  // in its output dtype); tp 1 has none, and its one GEMM reads the lhs and writes the output.
  // The caller's lhs and rhs are bf16 (quantized into as many FP8 elements).
  const int64_t ring = d.bytes.overlapped.ring;
  g.lhs_elems = ag && tp > 1 ? ring / in_size : d.bytes.lhs / kBf16;
  g.rhs_elems = d.bytes.rhs / kBf16;
  g.out_elems = !ag && tp > 1 ? ring / out_size : d.bytes.out / out_size;
  g.step_lhs_elems = g.lhs_elems / tp;
  g.step_out_elems = g.out_elems / tp;
  // The quantized rhs lies after the quantized lhs in "quant"; every chunk reads all of it.
  const std::string rhs_buffer = quantized ? "quant" : "rhs";
  const int64_t rhs_at = d.overlapped.gemms.empty() ? 0 : d.overlapped.gemms.front().rhs_offset;
  for (const ProgramGemm& pg : d.overlapped.gemms) {
    if (pg.rhs_buffer != rhs_buffer || pg.rhs_offset != rhs_at || (!quantized && rhs_at != 0)) {
      throw Error(where + ": a chunk GEMM reads its rhs from the plan's '" + pg.rhs_buffer +
                  "' at byte " + std::to_string(pg.rhs_offset) + ", which --parts does not map");
    }
    if (pg.lhs_buffer == "quant" && pg.lhs_offset >= rhs_at) {
      throw Error(where + ": a chunk GEMM reads its lhs from the plan's 'quant' at byte " +
                  std::to_string(pg.lhs_offset) + ", past the quantized lhs");
    }
    g.chunks.push_back({pg.task,
                        elements(pg.lhs_buffer, pg.lhs_offset, in_size,
                                 ag ? std::initializer_list<const char*>{"lhs", "ring", "quant"}
                                    : std::initializer_list<const char*>{"lhs", "quant"},
                                 where),
                        elements(pg.out_buffer, pg.out_offset, out_size,
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
