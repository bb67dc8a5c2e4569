#pragma once
// The planning behind plan_gemm (plan_description.hpp) with the private pieces GemmPlan runs:
// the local GEMM's geometry and its collective GEMM's programs.

#include <string>

#include "cgemm/runtime/plan_description.hpp"
#include "fsdp/fsdp_gather.hpp"
#include "gemm_layout.hpp"
#include "kinds/collective_gemm.hpp"

namespace cgemm {

struct PlannedGemm {
  PlanDescription description;
  GemmGeometry geometry;
  CollectiveGemm kind;
};

/// The rhs dim the caller gives sharded over the fsdp axis where the planner's answer is None
/// (gemm.py gathers it), or -1 when there is none. Other differences of `given` from `planned`
/// are left to the caller's check. Throws PlanError when two dims name the fsdp axis.
int fsdp_gathered_dim(const PartitionSpec& given, const PartitionSpec& planned,
                      const PlanningMesh& m, const std::string& where);

/// Throws PlanError explaining gemm.py's rule when the planner keeps the rhs sharded over the
/// fsdp axis and the output names it twice (a reduce axis, and an lhs batch sharded over a tuple
/// holding fsdp): the message require_axes_once would give, with why.
void require_fsdp_not_twice(const GemmSharding& s, const PlanningMesh& m, const std::string& where);

/// The FSDP gather of rhs dim `dim` (fsdp_gather.hpp): throws cgemm::Error where the runtime does
/// not run it (a quantized GEMM; a dim that is not the outermost non-contracting dim, or the
/// outermost contracting dim of an rhs stored [K..., N...]), PlanError when the dim does not
/// divide by fsdp. Sets r.rhs_gathered (the planner's local rhs), r.rhs_local (the shard) and
/// r.fsdp_dim.
FsdpGather plan_fsdp_gather(const GemmDesc& desc, const GemmLayouts& layout, int dim,
                            const PlanningMesh& m, PlanDescription& r);

/// GemmDesc::fsdp_scatter_dim (kinds/fsdp_reduce_scatter_gemm.cpp): checks it (a plain,
/// unquantized GEMM whose output the planner reduces over the fsdp axis; the output's first dim
/// or the first of the rhs's non-contracting dims; None there and divisible by fsdp), shards
/// r.out_local and r.out_spec on it, and says whether the blocks are rows or columns. Throws
/// PlanError or cgemm::Error naming the GEMM.
FsdpScatter plan_fsdp_scatter(const GemmDesc& desc, const GemmLayouts& layout,
                              const PlanningMesh& m, PlanDescription& r);

PlannedGemm plan_gemm_programs(const GemmDesc& desc, const PlanningMesh& mesh,
                               const PlanningOptions& options);

}  // namespace cgemm
