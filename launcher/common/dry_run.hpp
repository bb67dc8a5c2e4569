#pragma once
// cgemm-run's checks before a run and its dry run, both planned without a backend
// (cgemm/runtime/plan_description.hpp):
//  - value checks of the options that need the dtype (--std);
//  - the world a run plans for (--ranks_per_node: a job described from one process);
//  - every GEMM of the block planned on every rank before any backend exists, so sizes that
//    overflow or plans that cannot run end the job with one message;
//  - --dry_run: every rank's place, the plans, the transports and the bytes, printed by
//    rank 0 (and written as JSON to --report), with no backend, no allocation and no CUDA
//    call, for the backend a real run of the same job would take (backend auto predicted by
//    the backend rule from the GPUs each rank sees);
//  - the memory check: the bytes of the ranks that share a host (CPU) or a GPU (CUDA)
//    against that memory, after the backend rule and before any buffer is allocated.

#include <cstdint>
#include <string>

#include <vector>

#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/memory_check.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "dry_run_limits.hpp"
#include "run_config.hpp"

namespace cgemm::launcher {

/// The world size the run plans for: the MPI world, or dp x tp under --ranks_per_node (which
/// needs a single process, tp given, and --dry_run, at most kMaxDescribedRanks ranks and
/// world x tp at most kMaxDescribedRankPeers).
/// Throws OptionError.
int planned_world(const RunConfig& cfg, int mpi_world);

/// Option values that need the dtype or the GEMMs: --std must give inputs and outputs that
/// neither overflow the dtype nor underflow to zero in it. Throws OptionError.
void check_values(const RunConfig& cfg);

/// A block planned without a backend: one description per GEMM, for `backend`.
struct PlannedBlock {
  BackendKind backend = BackendKind::kCuda;
  std::vector<PlanDescription> plans;
};

/// Plans every GEMM of the block for this rank (world rank `rank` of the resolved mesh)
/// without a backend, on the backend kind the options name (auto plans as cuda). Throws the
/// planner's errors (PlanError, cgemm::Error), which are the same on every rank.
PlannedBlock plan_block(const RunConfig& cfg, int rank);

/// Where a rank of a dry run is: its host, its local rank, the GPUs it sees, and its GPU by
/// the backend rule (local rank modulo gpus; -1: none).
struct RankPlace {
  std::string host;
  int local_rank = 0;
  int gpus = 0;
  int gpu = -1;
};

/// The backend a real run of the placed job would take, and why, by Context's backend rule
/// (cgemm/runtime/context.hpp) without creating one: cpu stays cpu; auto is cuda when every
/// rank has a GPU of its own on hosts of even rank counts (or ranks share GPUs under
/// gpu_sharing), else cpu; cuda stays cuda, `refusal` saying why a real run would refuse it.
/// `cuda_built`: whether this cgemm has the CUDA backend (a described job, --ranks_per_node,
/// runs elsewhere: true).
struct PredictedBackend {
  BackendKind kind = BackendKind::kCpu;
  std::string why;      // how auto was decided; empty unless asked auto
  std::string refusal;  // backend cuda: why a real run would refuse it; empty when it would not
};
PredictedBackend predict_backend(BackendKind asked, bool gpu_sharing, bool cuda_built,
                                 const std::vector<RankPlace>& places);

/// The dry run: collective over MPI_COMM_WORLD (host names gathered to rank 0); rank 0
/// prints, and writes the plan as the JSON report when --report names a file. Returns the exit
/// status (0; 2 on rank 0 when the plan or the report fails), or throws the planner's errors.
int dry_run(const RunConfig& cfg, int mpi_world);

/// The memory check, collective over MPI_COMM_WORLD: "" when the job fits, else the refusal
/// (the same text on every rank of the memory that does not fit).
/// `planned` is plan_block's answer, used when the backend kind is the one it planned for.
std::string memory_refusal(const RunConfig& cfg, const PlannedBlock& planned, const Context& ctx);

}  // namespace cgemm::launcher
