// GemmPlan allocates its workspaces when it is made (Engine::prepare), under mpirun at 2 ranks:
// a rank whose allocation fails (here the last rank, under an address-space limit of its own)
// makes the plan fail on every rank, the others naming it, and every rank can then go on making
// and running plans: no rank is left waiting in a collective the failed one never reaches.

#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/resource.h>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../unit/sanitizers.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

// This process's virtual memory size in bytes (/proc/self/statm's first field, in pages).
long long virtual_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages = 0;
  statm >> pages;
  return pages * 4096;
}

TEST(PlanAllocation, ARankThatCannotAllocateFailsThePlanOnEveryRank) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit allows";
  }
  Context ctx(MPI_COMM_WORLD, MeshConfig{}, BackendKind::kCpu, OverlapOptions{});
  const int tp = ctx.comms().tp(), rank = ctx.comms().world_rank();
  if (ctx.comms().world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int victim = ctx.comms().world_size() - 1;
  // The gathered lhs alone is 1 GiB per rank (fp32 [1, 32768, 8192]): the ring and the
  // sequential path's workspace hold it twice over.
  const GemmDesc big = tensor_sequence_parallel_gemm(ctx, "big", CollectiveOp::kAllGather, 1, 32768,
                                                     8192, 8 * tp, DType::kFloat32, false, false);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  if (rank == victim) {
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(virtual_bytes() + (512LL << 20));
    ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  }
  std::string message;
  try {
    GemmPlan plan(ctx, big);
  } catch (const Error& e) {
    message = e.what();
  }
  if (rank == victim) {
    ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  }
  ASSERT_FALSE(message.empty()) << "rank " << rank << ": the plan was made";
  if (rank == victim) {
    EXPECT_NE(message.find("out of host memory"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("GEMM 'big': world rank " + std::to_string(victim) +
                           " could not allocate the plan's workspaces"),
              std::string::npos)
        << message;
  }

  // Every rank goes on: a small plan is made and runs, and its all-gather GEMM gives every
  // rank the product of the gathered lhs with its rhs shard.
  GemmPlan small(ctx,
                 tensor_sequence_parallel_gemm(ctx, "small", CollectiveOp::kAllGather, 1, 4 * tp, 8,
                                               2 * tp, DType::kFloat32, false, false));
  std::mt19937 gen(7u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> value(0.25f, 1.0f);
  std::vector<float> x(static_cast<size_t>(num_elements(small.lhs_local())));
  std::vector<float> w(static_cast<size_t>(num_elements(small.rhs_local())));
  for (float& v : x) v = value(gen);
  for (float& v : w) v = value(gen);
  std::vector<float> out(static_cast<size_t>(num_elements(small.out_local())), std::nanf(""));
  small.execute(Operands(x.data(), w.data(), nullptr, out.data()));
  // The reference: every rank's lhs rows gathered in rank order, times this rank's rhs, in fp64.
  std::vector<float> all(x.size() * static_cast<size_t>(tp));
  MPI_Allgather(x.data(), static_cast<int>(x.size()), MPI_FLOAT, all.data(),
                static_cast<int>(x.size()), MPI_FLOAT, ctx.comms().tp_comm());
  const int64_t k = 8, n = small.out_local().back(), m = static_cast<int64_t>(all.size()) / k;
  ASSERT_EQ(static_cast<int64_t>(out.size()), m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        want += static_cast<double>(all[static_cast<size_t>(i * k + p)]) *
                w[static_cast<size_t>(p * n + j)];
      }
      EXPECT_NEAR(out[static_cast<size_t>(i * n + j)], want, 1e-4 * std::abs(want))
          << "rank " << rank << " element " << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace cgemm
