#pragma once
// Partition-spec inference for a GEMM, as Transformer Engine's
// GemmPrimitive._parse_operand_output_specs (gemm.py), quirks included
// (tests/data/PLANNER_SCHEMA.md lists them under "Corners to reproduce literally").

#include <optional>
#include <utility>
#include <vector>

#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/sharding/partition_spec.hpp"
#include "cgemm/sharding/scaling_mode.hpp"

namespace cgemm {

/// Contracting dims of lhs and rhs; negative dims count from the end (d + ndim).
using ContractingDims = std::pair<std::vector<int>, std::vector<int>>;

struct OperandSpec {
  size_t ndim = 0;
  std::optional<PartitionSpec> spec;  // nullopt: fully unsharded
};

struct GemmShardingInput {
  MeshResource mesh_resource;
  OperandSpec lhs;
  OperandSpec rhs;
  std::optional<OperandSpec> bias;  // nullopt: no bias (size 0)
  ContractingDims contracting_dims;
  CollectiveOp collective_op = CollectiveOp::kNone;
  ScalingMode scaling_mode = ScalingMode::kNoScaling;
  bool transpose_batch_sequence = false;
};

struct GemmSharding {
  PartitionSpec lhs, lhs_scale, rhs, rhs_scale, bias;
  PartitionSpec out;
  std::optional<SpecEntry> reduce_spec;  // the axis (or tuple) the output is summed over
  std::optional<int> sequence_dim;       // nullopt when collective_op is none
  int warnings = 0;  // 1 when tp_resource is set and equals an entry of the padded lhs spec
};

/// Throws PlanError whenever gemm.py raises. The steps, all from
/// GemmPrimitive._parse_operand_output_specs:
///  - every spec is padded (misc.py get_padded_spec), the bias's too: too long is an error;
///  - reduce_spec: the one non-None entry shared by the lhs and rhs contracting specs
///    (a second one is "Multiple reduce dimension");
///  - all-gather: sequence_dim = lhs_specs.index(tpsp_resource), which must be 1 unless
///    transpose_batch_sequence (then anything but 1); reduce-scatter: reduce_spec must equal
///    tpsp_resource (both None passes), sequence_dim = int(not transpose_batch_sequence);
///  - with a reduce_spec other contracting entries become None and rhs non-contracting
///    entries found in lhs's become None; without, all contracting entries become None and
///    rhs non-contracting entries naming fsdp_resource (alone or in a tuple) become None;
///  - unless all-gather, lhs non-contracting entries found in rhs's become None;
///  - out = lhs_non + rhs_non with out[sequence_dim] set to None (all-gather) or to
///    tpsp_resource (reduce-scatter), bounds-checked with `>` so it may append;
///  - each operand spec is rebuilt as contracting + non-contracting when its first listed
///    contracting dim is 0, else non-contracting + contracting (an empty list is an error);
///  - scale specs follow the operands under 1D block scaling (the lhs scale with its
///    sequence dim unsharded for all-gather), else (None,).
GemmSharding infer_gemm_sharding(const GemmShardingInput& in);

}  // namespace cgemm
