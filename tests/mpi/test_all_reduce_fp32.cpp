// The plain GEMM's all-reduce sums float32 partials and casts once (issue 43 item 3; gemm.py's
// is_all_reduce_in_float32, cgemm's default on every transport), on the CPU backend or, with
// CGEMM_TEST_BACKEND=cuda, the CUDA backend (ranks sharing the GPU), under mpirun: tp = world.
//
// A bf16 GEMM whose contracting dim is sharded over tp, on fresh random inputs, against the fp64
// product: with the float32 sum every element is the fp64 value rounded once to bf16 (within half
// a bf16 ulp, plus fp32's own rounding); NVTE_JAX_ALL_REDUCE_IN_FP32=0 (gemm.py's default, the sum
// in bf16) rounds each rank's partial first, which that bound catches on some element at tp >= 2.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/backend_buffer.hpp"
#include "../support/global_tensors.hpp"
#include "../support/test_backend.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

std::unique_ptr<Context> g_ctx;
uint32_t g_seed = 0;

// Elements of the bf16 output off the fp64 reference by more than half a bf16 ulp (+ slack).
int64_t beyond_one_rounding(const GemmDesc& d, bool expect_fp32_summary) {
  GemmPlan plan(*g_ctx, d);
  EXPECT_EQ(plan.schedule_summary().find("in float32") != std::string::npos, expect_fp32_summary)
      << plan.schedule_summary();
  const int64_t m = d.lhs_shape[0], k = d.lhs_shape[1], n = d.rhs_shape[1];
  const auto x = test::random_tensor({m, k}, DType::kBFloat16, g_seed, 1);
  const auto w = test::random_tensor({k, n}, DType::kBFloat16, g_seed, 2);
  Backend& be = g_ctx->backend();
  const test::BackendBuffer xb(be, test::shard(x, {m, k}, plan.lhs_offset(), plan.lhs_local()),
                               DType::kBFloat16);
  const test::BackendBuffer wb(be, test::shard(w, {k, n}, plan.rhs_offset(), plan.rhs_local()),
                               DType::kBFloat16);
  test::BackendBuffer out(be, static_cast<size_t>(m * n) * 2);
  plan.execute(xb.get(), wb.get(), nullptr, out.get());
  const std::vector<double> got = out.values_back(DType::kBFloat16);
  int64_t beyond = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = x[static_cast<size_t>(i * k + p)] * w[static_cast<size_t>(p * n + j)];
        ref += t;
        mag += std::fabs(t);
      }
      const double v = got[static_cast<size_t>(i * n + j)];
      EXPECT_FALSE(std::isnan(v)) << i << ", " << j;
      // bf16 keeps 8 significant bits: half an ulp of ref's binade is 2^(e - 8).
      const double half_ulp = std::ldexp(1.0, std::ilogb(ref) - 8);
      if (std::fabs(v - ref) > half_ulp + 1e-5 * mag) ++beyond;
    }
  }
  return beyond;
}

GemmDesc sharded_contraction() {
  const int tp = g_ctx->comms().tp();
  GemmDesc d;
  d.name = "k over tp";
  d.lhs_shape = {32, 64 * tp};
  d.rhs_shape = {64 * tp, 48};
  d.lhs_spec = {SpecEntry::none(), SpecEntry::axis("tpsp")};
  d.rhs_spec = {SpecEntry::axis("tpsp"), SpecEntry::none()};
  d.contracting_dims = {{1}, {0}};
  d.dtype = d.out_dtype = DType::kBFloat16;
  return d;
}

TEST(AllReduceFp32, OneRoundingOfTheFloat32Sum) {
  unsetenv("NVTE_JAX_ALL_REDUCE_IN_FP32");
  const GemmDesc d = sharded_contraction();
  // tp 1 sums nothing: the GEMM writes its bf16 output directly (no float32 workspace).
  EXPECT_EQ(beyond_one_rounding(d, g_ctx->comms().tp() > 1), 0) << "the float32 sum rounds once";
}

TEST(AllReduceFp32, TheSeedsSwitchSumsInTheOutputDtype) {
  if (g_ctx->comms().tp() < 2) GTEST_SKIP() << "one rank: nothing is summed";
  setenv("NVTE_JAX_ALL_REDUCE_IN_FP32", "0", 1);
  const int64_t beyond = beyond_one_rounding(sharded_contraction(), false);
  unsetenv("NVTE_JAX_ALL_REDUCE_IN_FP32");
  EXPECT_GT(beyond, 0) << "bf16 partials summed should round more than once somewhere";
}

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  cgemm::g_seed = std::random_device{}();
  MPI_Bcast(&cgemm::g_seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  const std::optional<cgemm::BackendOptions> backend = cgemm::test::backend_from_env();
  if (!backend) {
    if (rank == 0) std::printf("CGEMM_TEST_BACKEND=cuda, but some rank has no GPU: skipped\n");
    MPI_Finalize();
    return 0;
  }
  if (rank == 0) {
    std::printf("seed %u, backend %s\n", cgemm::g_seed, cgemm::test::backend_word(*backend));
  }
  cgemm::g_ctx = std::make_unique<cgemm::Context>(
      MPI_COMM_WORLD, cgemm::MeshConfig{.dp = 1, .tp = 0}, *backend, cgemm::OverlapOptions{});
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
