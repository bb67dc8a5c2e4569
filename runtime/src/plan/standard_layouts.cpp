// The standard tensor-sequence-parallel layouts (plan.hpp's tensor_sequence_parallel_gemm) on a
// mesh's axis names, with the fsdp axis where the mesh has one.

#include "cgemm/runtime/plan_description.hpp"

namespace cgemm {

namespace {

SpecEntry entry(const std::string& axis) { return SpecEntry::axis(axis); }

}  // namespace

GemmDesc tensor_sequence_parallel_gemm(const PlanningMesh& mesh, std::string name,
                                       CollectiveOp collective, int64_t batch, int64_t seq_len,
                                       int64_t hidden_in, int64_t hidden_out, DType dtype,
                                       bool bias, bool transpose_batch_sequence) {
  const std::string& dp = mesh.dp_axis;
  const std::string& tpsp = mesh.tpsp_axis;
  const SpecEntry none = SpecEntry::none();
  GemmDesc d;
  d.name = std::move(name);
  d.collective = collective;
  d.dtype = dtype;
  d.out_dtype = dtype;
  d.transpose_batch_sequence = transpose_batch_sequence;
  d.lhs_shape = transpose_batch_sequence ? Shape{seq_len, batch, hidden_in}
                                         : Shape{batch, seq_len, hidden_in};
  d.rhs_shape = {hidden_in, hidden_out};
  d.contracting_dims = {{2}, {0}};
  // Activation specs are written batch-first, then swapped for sequence-first layouts.
  // With an fsdp axis the batch is sharded over (dp, fsdp) (fsdp alone without replicas) and
  // the weight over fsdp where gemm.py gathers it: its output columns (the row-parallel
  // weight, and any weight at tp 1), or, for the column-parallel weight whose columns are
  // tp's, its contracting rows. Without, the dp x tp layouts, as before the axis existed.
  const bool fsdp = mesh.fsdp > 1;
  const SpecEntry data = !fsdp          ? entry(dp)
                         : mesh.dp == 1 ? entry(mesh.fsdp_axis)
                                        : SpecEntry::tuple({dp, mesh.fsdp_axis});
  const SpecEntry shard = entry(mesh.fsdp_axis);
  PartitionSpec x;
  if (collective == CollectiveOp::kAllGather) {
    x = {data, entry(tpsp), none};
    d.rhs_spec = {none, entry(tpsp)};
    d.bias_spec = {entry(tpsp)};
    if (fsdp && mesh.tp > 1) d.rhs_spec = {shard, entry(tpsp)};
    if (fsdp && mesh.tp == 1) {
      d.rhs_spec = {none, shard};
      d.bias_spec = {none};  // gemm.py: the bias follows the gathered columns
    }
  } else {
    x = {data, none, entry(tpsp)};
    d.rhs_spec = {entry(tpsp), fsdp ? shard : none};
    d.bias_spec = {none};
  }
  if (transpose_batch_sequence) std::swap(x[0], x[1]);
  d.lhs_spec = x;
  if (bias) d.bias_shape = Shape{hidden_out};
  return d;
}

}  // namespace cgemm
