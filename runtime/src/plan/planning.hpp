#pragma once
// The planning behind plan_gemm (plan_description.hpp) with the private pieces GemmPlan runs:
// the local GEMM's geometry and its collective GEMM's programs.

#include "cgemm/runtime/plan_description.hpp"
#include "kinds/collective_gemm.hpp"

namespace cgemm {

struct PlannedGemm {
  PlanDescription description;
  GemmGeometry geometry;
  CollectiveGemm kind;
};

PlannedGemm plan_gemm_programs(const GemmDesc& desc, const PlanningMesh& mesh,
                               const PlanningOptions& options);

}  // namespace cgemm
