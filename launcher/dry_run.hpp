#pragma once
// cgemm-run's checks before a run and its dry run, both planned without a backend
// (cgemm/runtime/plan_description.hpp):
//  - value checks of the options that need the dtype (--std);
//  - the world a run plans for (--ranks_per_node: a job described from one process);
//  - every GEMM of the block planned on every rank before any backend exists, so sizes that
//    overflow or plans that cannot run end the job with one message;
//  - --dry_run: every rank's place, the plans, the transports and the bytes, printed by
//    rank 0, with no backend, no allocation and no CUDA call;
//  - the memory check: the bytes of the ranks that share a host (CPU) or a GPU (CUDA)
//    against that memory, after the backend rule and before any buffer is allocated.

#include <string>

#include <vector>

#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "run_config.hpp"

namespace cgemm::launcher {

/// The world size the run plans for: the MPI world, or dp x tp under --ranks_per_node (which
/// needs a single process, tp given, and --dry_run). Throws OptionError.
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

/// The dry run: collective over MPI_COMM_WORLD (host names gathered to rank 0); rank 0
/// prints. Returns the exit status (0), or throws the planner's errors.
int dry_run(const RunConfig& cfg, int mpi_world);

/// The memory check, collective over MPI_COMM_WORLD: "" when the job fits, else the refusal
/// (the same text on every rank of the memory that does not fit).
/// `planned` is plan_block's answer, used when the backend kind is the one it planned for.
std::string memory_refusal(const RunConfig& cfg, const PlannedBlock& planned, const Context& ctx);

}  // namespace cgemm::launcher
