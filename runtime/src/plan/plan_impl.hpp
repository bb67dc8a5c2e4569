#pragma once
// Private state of a GemmPlan: the local GEMM's geometry, the programs of its collective GEMM
// kind, the engine that runs them (and owns the workspaces), and the overlap policy's choice.

#include "cgemm/runtime/plan.hpp"
#include "kinds/collective_gemm.hpp"
#include "program/engine.hpp"

namespace cgemm {

struct GemmPlan::Impl {
  Impl(Backend& be, int world_rank, SharedRing* fsdp_ring, GemmGeometry g, CollectiveGemm k)
      : geometry(std::move(g)),
        kind(std::move(k)),
        overlapped_operands(kind.overlapped.operands_used()),
        sequential_operands(kind.sequential.operands_used()),
        engine(be, world_rank, fsdp_ring) {
    if (kind.overlapped_gathering) {
      overlapped_gathering_operands = kind.overlapped_gathering->operands_used();
    }
    if (kind.sequential_gathering) {
      sequential_gathering_operands = kind.sequential_gathering->operands_used();
    }
  }

  GemmGeometry geometry;
  CollectiveGemm kind;
  // The caller's slots each path uses, checked on every call.
  std::vector<Operand> overlapped_operands, sequential_operands;
  std::vector<Operand> overlapped_gathering_operands, sequential_gathering_operands;
  PlanDescription description;  // what plan_gemm says of it (shapes, offsets, bytes)
  std::string call_name;        // "GEMM 'NAME'": what a refusal names (made once, not per call)
  Engine engine;

  // OverlapOptions::policy and the path it picks (kAuto: by its rule, at planning).
  OverlapPolicy policy = OverlapPolicy::kAuto;
  bool use_overlap = true;
  double chunk_flop = 0.0;  // one chunk's GEMM, for kAuto's rule
};

}  // namespace cgemm
