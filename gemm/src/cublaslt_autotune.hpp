#pragma once
// The choice of a cuBLASLt plan's algorithm (private to gemm/): when it is timed and on what,
// with candidate_tuner's policy run on CUDA events (docs/GEMM_TUNER.md).

#include <cuda_runtime_api.h>

#include <cstddef>

#include "cublaslt_plan.hpp"

namespace cgemm::detail {

struct TuneSettings {
  bool autotune = true;  // CGEMM_GEMM_AUTOTUNE
  size_t l2_bytes = 0;   // the device's L2, cleared before every timed run
};

/// Sets plan.chosen and plan.choice (but its algo_id) for the problem `t`, by timing the
/// candidates on `stream` with workspace `ws` unless one of the reasons for heuristic #1
/// holds. Called once per plan, with no other thread using it. Returns whether it timed.
/// Throws cgemm::Error when every candidate fails.
bool choose_algorithm(LtPlan& plan, const LtContext& ctx, const TuneSettings& settings,
                      const GemmTask& t, const PlanKey& key, cudaStream_t stream, void* ws);

}  // namespace cgemm::detail
