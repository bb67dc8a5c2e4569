#pragma once
// Private state of a GemmPlan: the local GEMM's geometry, the programs of its collective GEMM
// kind, the engine that runs them (and owns the workspaces), and the overlap policy's choice.

#include "cgemm/runtime/plan.hpp"
#include "collective_gemm.hpp"
#include "engine.hpp"

namespace cgemm {

struct GemmPlan::Impl {
  Impl(Backend& be, int world_rank, GemmGeometry g, CollectiveGemm k)
      : geometry(std::move(g)), kind(std::move(k)), engine(be, world_rank) {}

  GemmGeometry geometry;
  CollectiveGemm kind;
  PlanDescription description;  // what plan_gemm says of it (shapes, offsets, bytes)
  Engine engine;

  // OverlapOptions::policy and, under kAuto, what the first call measured.
  OverlapPolicy policy = OverlapPolicy::kAuto;
  bool path_decided = false;
  bool use_overlap = true;
  double auto_overlapped_ms = 0.0, auto_sequential_ms = 0.0;
};

}  // namespace cgemm
