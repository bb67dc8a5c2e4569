// Plain GEMM (collective none): one GEMM on the local shards; where the planner reduces the
// output over an axis the runtime runs (the tensor-parallel axis; the fsdp axis, and
// ('dp', 'fsdp') with replicas, for FSDP's bias gradients), an all-reduce over each of its
// groups, then the bias (gemm.py adds it after the reduction, so it is not fused). Nothing to
// overlap: both paths are the same program.

#include "collective_gemm.hpp"

namespace cgemm {

CollectiveGemm make_plain_gemm(GemmGeometry& g) {
  if (!g.reduce_axis.empty() && g.reduce_groups.empty()) {
    throw Error("GEMM '" + g.name + "': the output is reduced over " + g.reduce_axis +
                "; the runtime all-reduces over the tensor-parallel axis only (and, on a mesh "
                "with an fsdp axis, over fsdp or ('dp', 'fsdp'))");
  }
  g.chunk_rows = g.lhs_rows;
  const int64_t out_count = checked_mul(g.lhs_rows, g.n, "GEMM '" + g.name + "' output");
  g.bytes(g.lhs_rows, g.n, g.out_size(), "output");

  CollectiveGemm c;
  c.overlappable = false;
  c.gemm_rows = g.lhs_rows;
  GemmTask t = g.task();
  t.m = g.lhs_rows;
  Program& p = c.overlapped;
  const Ref lhs = g.lhs_src, out{Operand::kOut};
  const std::optional<Ref> bias =
      g.has_bias ? std::optional<Ref>(Ref{Operand::kBias}) : std::nullopt;
  p.ops.push_back(g.gemm(t, lhs, out, g.fuse_bias ? bias : std::nullopt, 0, g.name + " gemm"));
  for (const Group group : g.reduce_groups) {
    // The tp all-reduce keeps its label (the golden programs); the others name their group.
    const std::string label =
        g.name + " all-reduce" +
        (group == Group::kTp ? "" : std::string(" over ") + group_name(group));
    p.ops.push_back(AllReduceOp{out, g.out, out_count, 0, label, group});
    c.collective_only.ops.push_back(AllReduceOp{out, g.out, out_count, 0, label, group});
  }
  if (!g.reduce_groups.empty() && g.has_bias) {
    p.ops.push_back(SumOp{{out}, g.out, out_count, bias, g.n, out, g.out, 0});
  }
  c.sequential = p;
  c.gemm_only.ops.push_back(g.gemm(t, lhs, out, std::nullopt, 0, g.name + " gemm"));
  c.summary = "one GEMM [" + std::to_string(g.lhs_rows) + " x " + std::to_string(g.k) + "] @ [" +
              std::to_string(g.k) + " x " + std::to_string(g.n) + "]" +
              (g.lhs_transposed ? " (lhs stored [k, m])" : "") +
              (g.reduce_axis.empty() ? "" : ", all-reduce over " + g.reduce_axis);
  return c;
}

}  // namespace cgemm
