// The all-gather GEMM's gathered lhs (Operand::kGatheredLhs, plan.hpp) on the CPU backend under
// mpirun: 1 rank, tp 2, tp 3, tp 4 and dp 2 x tp 2 (argument --dp=2). The buffer a call hands
// out must hold the same bytes as ActivationGather's all-gather of the same shards, on both
// paths, batch-first (local batch 1 and 2: contiguous and strided chunks) and sequence-first,
// with chunks_per_rank 2 and aggregate_all_gather; the GEMM's output must be the same bits as
// a call without it; a GEMM that has no gathered lhs to hand out refuses the request before
// any work.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/error_of.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/runtime/activation_gather.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

int g_dp = 1;
uint32_t g_seed = 0;  // rank 0's, broadcast

// Random bytes of `count` elements of `dtype`: values in +-[0.25, 1] (never zero), different
// on every rank and for every `stream`.
std::vector<char> random_bytes(int64_t count, DType dtype, int rank, uint32_t stream) {
  std::mt19937 gen(g_seed + 7919u * stream + 104729u * static_cast<uint32_t>(rank));
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = sign(gen) ? mag(gen) : -mag(gen);
  std::vector<char> out(v.size() * dtype_size(dtype));
  convert_from_float(v.data(), out.data(), dtype, count);
  return out;
}

// 0xff bytes: NaN in fp32 and bf16, so an element nobody wrote cannot pass as a value.
std::vector<char> poison(int64_t count, DType dtype) {
  return std::vector<char>(static_cast<size_t>(count) * dtype_size(dtype), static_cast<char>(0xff));
}

struct Variant {
  std::string name;
  OverlapOptions overlap;
};

std::vector<Variant> variants() {
  OverlapOptions pieces;
  pieces.chunks_per_rank = 2;
  OverlapOptions aggregate;
  aggregate.aggregate_all_gather = true;
  return {{"default", {}}, {"chunks_per_rank 2", pieces}, {"aggregate", aggregate}};
}

struct Case {
  int64_t batch_per_dp;
  bool tbs;
  DType dtype;
};

TEST(GatheredLhs, EqualsTheActivationGatherBitForBitOnBothPaths) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    Context ctx(MPI_COMM_WORLD, MeshConfig{.dp = g_dp, .tp = 0}, BackendKind::kCpu, v.overlap);
    const int tp = ctx.comms().tp();
    const int rank = ctx.comms().world_rank();
    for (const Case& c : {Case{1, false, DType::kFloat32}, Case{2, false, DType::kFloat32},
                          Case{1, true, DType::kFloat32}, Case{2, true, DType::kBFloat16}}) {
      SCOPED_TRACE("local batch " + std::to_string(c.batch_per_dp) +
                   (c.tbs ? " seq-first " : " batch-first ") + std::string(dtype_name(c.dtype)));
      GemmPlan plan(ctx, tensor_sequence_parallel_gemm(ctx, "ag", CollectiveOp::kAllGather,
                                                       c.batch_per_dp * g_dp, 4 * tp, 6, 4 * tp,
                                                       c.dtype, true, c.tbs));
      ActivationGather gather(ctx, "reference", plan.lhs_local(), c.dtype, c.tbs);
      ASSERT_EQ(plan.gathered_lhs_local(), gather.gathered());
      const int64_t gathered = num_elements(plan.gathered_lhs_local());
      const auto lhs = random_bytes(num_elements(plan.lhs_local()), c.dtype, rank, 1);
      const auto rhs = random_bytes(num_elements(plan.rhs_local()), c.dtype, rank, 2);
      const auto bias = random_bytes(num_elements(plan.bias_local()), c.dtype, rank, 3);
      auto want = poison(gathered, c.dtype);
      gather.execute(lhs.data(), want.data());

      const int64_t out_count = num_elements(plan.out_local());
      for (bool overlapped : {true, false}) {
        SCOPED_TRACE(overlapped ? "overlapped" : "sequential");
        const auto call = [&](const Operands& x) {
          if (overlapped) {
            plan.execute_overlapped(x);
          } else {
            plan.execute_sequential(x);
          }
        };
        auto plain_out = poison(out_count, c.dtype);
        call(Operands(lhs.data(), rhs.data(), bias.data(), plain_out.data()));
        for (int round = 0; round < 2; ++round) {  // the second call reuses the workspaces
          auto out = poison(out_count, c.dtype);
          auto got = poison(gathered, c.dtype);
          call(Operands(lhs.data(), rhs.data(), bias.data(), out.data())
                   .set_output(Operand::kGatheredLhs, got.data()));
          EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << "round " << round;
          EXPECT_EQ(std::memcmp(out.data(), plain_out.data(), out.size()), 0)
              << "the output differs from a call without gathered_lhs, round " << round;
        }
      }
    }
  }
}

using test::error_of;

TEST(GatheredLhs, GemmsWithoutAGatheredLhsRefuseTheRequestBeforeAnyWork) {
  Context ctx(MPI_COMM_WORLD, MeshConfig{.dp = g_dp, .tp = 0}, BackendKind::kCpu, {});
  const int tp = ctx.comms().tp();
  const auto check = [&](const GemmDesc& desc, const std::string& why) {
    SCOPED_TRACE(desc.name);
    GemmPlan plan(ctx, desc);
    EXPECT_TRUE(plan.gathered_lhs_local().empty());
    const auto lhs = random_bytes(num_elements(plan.lhs_local()), desc.dtype, 0, 4);
    const auto rhs = random_bytes(num_elements(plan.rhs_local()), desc.dtype, 0, 5);
    const int64_t out_count = num_elements(plan.out_local());
    auto out = poison(out_count, desc.out_dtype);
    auto gathered = poison(num_elements(plan.lhs_local()) * tp, desc.dtype);
    const auto untouched = out;
    for (bool overlapped : {true, false}) {
      const std::string msg = error_of([&] {
        const Operands x = Operands(lhs.data(), rhs.data(), nullptr, out.data())
                               .set_output(Operand::kGatheredLhs, gathered.data());
        if (overlapped) {
          plan.execute_overlapped(x);
        } else {
          plan.execute_sequential(x);
        }
      });
      EXPECT_NE(msg.find("GEMM '" + desc.name + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("gathered_lhs"), std::string::npos) << msg;
      EXPECT_NE(msg.find(why), std::string::npos) << msg;
      EXPECT_EQ(out, untouched) << "the refused call wrote its output";
    }
  };
  check(tensor_sequence_parallel_gemm(ctx, "rs", CollectiveOp::kReduceScatter, g_dp, 4 * tp, 8 * tp,
                                      6, DType::kFloat32, false, false),
        "collective is reduce_scatter");
  check(tensor_sequence_parallel_gemm(ctx, "plain", CollectiveOp::kNone, g_dp, 4 * tp, 8 * tp, 6,
                                      DType::kFloat32, false, false),
        "collective is none");
  GemmDesc fp8 =
      tensor_sequence_parallel_gemm(ctx, "fp8 ag", CollectiveOp::kAllGather, g_dp, 16 * tp, 32,
                                    16 * tp, DType::kBFloat16, false, false);
  fp8.quantization.mode = ScalingMode::kCurrentTensorScaling;
  check(fp8, "quantizes its lhs");
}

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--dp=2") cgemm::g_dp = 2;
  }
  cgemm::g_seed = std::random_device{}();
  MPI_Bcast(&cgemm::g_seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("seed %u, dp %d x tp %d\n", cgemm::g_seed, cgemm::g_dp, world / cgemm::g_dp);
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
