#include "job.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/watchdog.hpp"
#include "printable_text.hpp"

namespace cgemm::launcher {

namespace {
std::string& program() {
  static std::string name = "cgemm";
  return name;
}
}  // namespace

void set_program_name(std::string name) { program() = std::move(name); }

int world_rank() {
  int r = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}

int world_size() {
  int n = 1;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size");
  return n;
}

bool all_ranks_ok(const std::function<void()>& phase) {
  std::string error;
  try {
    phase();
  } catch (const std::exception& e) {
    error = e.what();
  }
  return !any_rank_failed(error);
}

bool context_for(const SharedOptions& opts, int tp, const OverlapOptions& overlap,
                 std::unique_ptr<Context>& ctx) {
  if (ctx && ctx->overlap() == overlap) return true;
  ctx.reset();
  std::string error;
  try {
    ctx = std::make_unique<Context>(
        MPI_COMM_WORLD, MeshConfig{opts.dp, tp, "dp", "tpsp", opts.fsdp, "fsdp"},
        BackendOptions{opts.backend, opts.gpu_sharing, opts.timeout, nullptr, opts.transport},
        overlap);
  } catch (const BackendRuleError& e) {
    error = e.what();
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
  return !any_rank_failed(error);
}

std::vector<std::string> host_names() {
  std::array<char, MPI_MAX_PROCESSOR_NAME> mine{};
  int len = 0;
  check_mpi(MPI_Get_processor_name(mine.data(), &len), "MPI_Get_processor_name");
  const size_t n = static_cast<size_t>(world_size());
  std::vector<char> all(n * MPI_MAX_PROCESSOR_NAME);
  const watchdog::WaitScope wait("the other ranks' host names");
  check_mpi(MPI_Allgather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                          MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Allgather(host names)");
  std::vector<std::string> out;
  for (size_t r = 0; r < n; ++r) {
    const char* name = all.data() + r * MPI_MAX_PROCESSOR_NAME;
    out.emplace_back(name, strnlen(name, MPI_MAX_PROCESSOR_NAME));
  }
  return out;
}

bool any_rank_failed(const std::string& error) {
  const int me = world_rank();
  int first = error.empty() ? INT_MAX : me;
  const watchdog::WaitScope wait("the other ranks, to agree whether any failed");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
            "MPI_Allreduce(errors)");
  if (first == INT_MAX) return false;
  if (first == me) {
    std::cerr << program() << ": error: " << printable(error) << "\n";
    std::cerr.flush();
  }
  return true;
}

void abort_job(const std::string& error) {
  std::cerr << program() << ": rank " << world_rank() << ": error: " << printable(error) << "\n"
            << program() << ": aborting the job so no rank waits forever\n";
  std::cerr.flush();
  MPI_Abort(MPI_COMM_WORLD, 1);  // its code is not checked: the job ends either way
  std::abort();
}

void say(const std::string& line) {
  if (world_rank() == 0) {
    std::cout << line << "\n";
    std::cout.flush();
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<double> time_iterations(Backend& be, int iterations,
                                    const std::function<void()>& body) {
  std::vector<double> samples;
  for (int i = 0; i < iterations; ++i) {
    be.synchronize();
    {
      const watchdog::WaitScope wait("the barrier before timed iteration " + std::to_string(i));
      check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier(timed iteration)");
    }
    double ms = be.time_ms(body);
    const watchdog::WaitScope wait("the other ranks' time of iteration " + std::to_string(i));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &ms, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce(iteration time)");
    samples.push_back(ms);
  }
  return samples;
}

MemoryCheck check_shared_memory(const Context& ctx, int64_t mine) {
  const BackendKind backend = ctx.backend().kind();
  int64_t together = 0;
  const int sharing = ctx.ranks_sharing_memory();
  if (backend == BackendKind::kCpu) {
    // Exact: the sum over the ranks of this host.
    check_mpi(MPI_Allreduce(&mine, &together, 1, MPI_INT64_T, MPI_SUM, ctx.comms().node_comm()),
              "MPI_Allreduce(memory need)");
  } else {
    // The ranks on one GPU: each needs at most the largest need of its host.
    int64_t most = 0;
    check_mpi(MPI_Allreduce(&mine, &most, 1, MPI_INT64_T, MPI_MAX, ctx.comms().node_comm()),
              "MPI_Allreduce(memory need)");
    together = checked_mul(most, sharing, "memory need");
  }
  return check_memory(backend, together, sharing, mine);
}

}  // namespace cgemm::launcher
