#pragma once
// cgemm-run's MoE expert block experiment (experiment = moe; issue 25 item 4): the two expert
// projections of a mixture-of-experts layer as grouped GEMMs (cgemm/runtime/grouped_plan.hpp),
// timed, and checked against an fp64 reference per group.
//
// The block (T tokens, G experts, hidden H, FFN size F; moe_options.hpp):
//   sizes = the router's G group sizes, drawn from the seed (moe_router.hpp); the same on
//           every rank. The tokens are already sorted by expert: group g owns rows
//           [off_g, off_g + size_g) of x (no permutation is run or timed).
//   up    = grouped GEMM x [T, H] @ w_up[g] ([G, H, F]) -> h [T, F]
//   down  = grouped GEMM h [T, F] @ w_down[g] ([G, F, H]) -> y [T, H]
// GEMMs only: no activation between them (cgemm has no elementwise op to run there) and no
// bias; dtype (bf16, fp16, fp32) is the inputs' and the outputs' type.
//
// Ranks: every rank runs the block on its own, with no collective: data-parallel replicas with
// the same weights (drawn from seed) and their own tokens (drawn from seed and the world rank).
// Times are the slowest rank's, per iteration.
//
// Timing: warmup untimed calls of the block, then `iterations` timed calls of up alone, of
// down alone, and of the block (up, then down), each timed by the backend's time_ms (CUDA
// events on the CUDA backend); the medians are reported. TFLOP/s count the real, ragged work:
// 2 x sum(sizes) x H x F per projection (GroupedGemmPlan::flops), twice that for the block,
// per rank.
//
// Check (check = on): check_rounds rounds, each on fresh inputs, h and y poisoned with NaN
// before the call; h against the fp64 reference of x @ w_up[g], and y against that of h @
// w_down[g] with h as the up projection wrote it (each projection checked on the inputs it
// read), by moe_check.hpp's bounds, rows chosen by moe_check_rows. Every rank checks its own.

#include <cstdint>
#include <nlohmann/json.hpp>

#include "cgemm/runtime/context.hpp"
#include "common/job.hpp"
#include "common/run_config.hpp"

namespace cgemm::launcher {

struct MoeOutcome {
  int rc = kExitUsage;    // 0, kExitCheckFailed, or kExitUsage (already reported)
  double block_ms = 0.0;  // median time of the block
  double flops = 0.0;     // of the block, per rank
  int64_t failures = 0;   // check failures over the ranks and projections
};

/// Runs the experiment on every rank of `ctx` (collective over MPI_COMM_WORLD), prints from
/// rank 0 and writes cfg.report: `report` (the report's header) with "moe" added. A planning
/// error, the same on every rank, is one message (rc kExitUsage); a fault of one rank aborts
/// the job.
MoeOutcome run_moe(const RunConfig& cfg, Context& ctx, nlohmann::json report);

}  // namespace cgemm::launcher
