// The C API's memory check of a plan (plan_memory.hpp).

#include "plan_memory.hpp"

#include <mpi.h>

#include <algorithm>
#include <string>

#include "capi_errors.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/runtime/memory_check.hpp"
#include "cgemm/runtime/plan.hpp"
#include "rank_agreement.hpp"

namespace cgemm::capi {

void check_plan_memory(const cgemm::Context& ctx, const cgemm::GemmDesc& g) {
  const cgemm::PlanningOptions opt = cgemm::planning_options(ctx);
  const cgemm::PlanningMesh m = cgemm::planning_mesh(ctx);
  const bool cpu = opt.backend == cgemm::BackendKind::kCpu;
  // Planning is a function of the arguments, which the ranks agreed: its errors are alike.
  const cgemm::PlanBytes b = cgemm::plan_gemm(g, m, opt).bytes;
  // The fsdp ring is the context's, shared by its plans: only its growth is new memory.
  const int64_t ring = std::min(b.fsdp_ring, ctx.fsdp_ring_bytes());
  const int64_t mine = b.total() - b.operands() - ring;
  const int sharing = ctx.ranks_sharing_memory();
  int64_t together = 0;
  MPI_Comm node = ctx.comms().node_comm();
  if (cpu) {
    check_mpi_call(MPI_Allreduce(&mine, &together, 1, MPI_INT64_T, MPI_SUM, node),
                   "MPI_Allreduce(memory need)");
  } else {
    // The ranks on one GPU: each needs at most the largest need of its host.
    int64_t most = 0;
    check_mpi_call(MPI_Allreduce(&mine, &most, 1, MPI_INT64_T, MPI_MAX, node),
                   "MPI_Allreduce(memory need)");
    together = cgemm::checked_mul(most, sharing, "memory need");
  }
  const cgemm::MemoryCheck c = cgemm::check_memory(opt.backend, together, sharing, mine);
  const std::string error =
      c.ok ? ""
           : c.message + " (GEMM '" + g.name + "': its workspaces and scale state need " +
                 std::to_string(mine) + " bytes on each rank; nothing was allocated)";
  const auto [first, message] = first_failing_rank(ctx.comms().world(), error);
  if (first >= 0) throw OutOfMemoryError("world rank " + std::to_string(first) + ": " + message);
}

}  // namespace cgemm::capi
