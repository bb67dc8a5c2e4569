// Plain GEMM (collective none): one GEMM on the local shards; where the planner reduces the
// output over an axis the runtime runs (the tensor-parallel axis; the data-parallel axis; the
// fsdp axis, and ('dp', 'fsdp') with replicas, for FSDP's bias gradients), an all-reduce over
// each of its groups, then the bias (gemm.py adds it after the reduction, so it is not fused). The
// all-reduce sums float32 partials and casts after (gemm.py's is_all_reduce_in_float32, cgemm's
// default on every transport): the GEMM writes float32 to kWorkOut, the sum's cast adds the
// bias. Nothing to overlap: both paths are the same program.

#include <algorithm>

#include "collective_gemm.hpp"

namespace cgemm {

CollectiveGemm make_plain_gemm(GemmGeometry& g) {
  if (!g.reduce_axis.empty() && g.reduce_groups.empty()) {
    throw Error("GEMM '" + g.name + "': the output is reduced over " + g.reduce_axis +
                "; the runtime all-reduces over the tensor-parallel or the data-parallel axis "
                "only (and, on a mesh with an fsdp axis, over fsdp or ('dp', 'fsdp'))");
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
  // A sum over groups of one rank each (tp 1) adds nothing: the output is written directly.
  const auto size = [&g](Group group) {
    return group == Group::kTp ? g.tp : group == Group::kDp ? g.dp : g.fsdp;
  };
  const bool sums = std::any_of(g.reduce_groups.begin(), g.reduce_groups.end(),
                                [&](Group group) { return size(group) > 1; });
  const bool fp32_sum = sums && g.reduce_in_fp32 && g.out != DType::kFloat32;
  const Ref sum = fp32_sum ? Ref{Workspace::kWorkOut} : out;
  const DType sum_dtype = fp32_sum ? DType::kFloat32 : g.out;
  if (fp32_sum) {
    t.out_dtype = DType::kFloat32;
    const auto bytes =
        static_cast<int64_t>(g.bytes(g.lhs_rows, g.n, dtype_size(DType::kFloat32), "fp32 sum"));
    p.workspace.work_out = c.collective_only.workspace.work_out = bytes;
  }
  p.ops.push_back(g.gemm(t, lhs, sum, g.fuse_bias ? bias : std::nullopt, 0, g.name + " gemm"));
  for (const Group group : g.reduce_groups) {
    // The tp all-reduce keeps its label (the golden programs); the others name their group.
    const std::string label =
        g.name + " all-reduce" +
        (group == Group::kTp ? "" : std::string(" over ") + group_name(group));
    p.ops.push_back(AllReduceOp{sum, sum_dtype, out_count, 0, label, group});
    c.collective_only.ops.push_back(AllReduceOp{sum, sum_dtype, out_count, 0, label, group});
  }
  if (fp32_sum || (!g.reduce_groups.empty() && g.has_bias)) {
    p.ops.push_back(SumOp{{sum}, sum_dtype, out_count, bias, g.n, out, g.out, 0});
  }
  c.sequential = p;
  GemmTask whole = g.task();  // the benchmark's GEMM alone, in the output dtype
  whole.m = g.lhs_rows;
  c.gemm_only.ops.push_back(g.gemm(whole, lhs, out, std::nullopt, 0, g.name + " gemm"));
  c.summary = "one GEMM [" + std::to_string(g.lhs_rows) + " x " + std::to_string(g.k) + "] @ [" +
              std::to_string(g.k) + " x " + std::to_string(g.n) + "]" +
              (g.lhs_transposed ? " (lhs stored [k, m])" : "") +
              (g.reduce_axis.empty()
                   ? ""
                   : ", all-reduce over " + g.reduce_axis + (fp32_sum ? " in float32" : ""));
  return c;
}

}  // namespace cgemm
