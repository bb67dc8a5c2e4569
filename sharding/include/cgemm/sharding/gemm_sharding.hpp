#pragma once
// Partition-spec inference for a GEMM, as Transformer Engine's
// GemmPrimitive._parse_operand_output_specs (gemm.py), quirks included
// (see ../shared/planner-cases/SCHEMA.md "Corners to reproduce literally").

#include <optional>
#include <utility>
#include <vector>

#include "cgemm/sharding/partition_spec.hpp"

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

/// Throws PlanError whenever gemm.py raises.
GemmSharding infer_gemm_sharding(const GemmShardingInput& in);

}  // namespace cgemm
