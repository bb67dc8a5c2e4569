// GemmPlan's caller stream and BackendOptions::nccl_comm on the CPU backend, under mpirun (1 and
// 2 ranks): the CPU backend ignores a stream (its calls are synchronous), so execute,
// execute_overlapped and execute_sequential on a stream give the same bits as without one, for
// the all-gather, reduce-scatter and plain GEMMs; a borrowed NCCL communicator is refused with
// BackendRuleError on every rank before its pointer is looked at. The CUDA backend's ordering
// on a real stream: tests/gpu/test_caller_stream.cpp.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

int rank_of_world() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// Values in +-[0.25, 1] (never zero), different on every rank and for every `stream_id`.
std::vector<float> random_values(int64_t count, uint32_t stream_id) {
  std::mt19937 gen(12345u + 7919u * stream_id + 104729u * static_cast<uint32_t>(rank_of_world()));
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = sign(gen) ? mag(gen) : -mag(gen);
  return v;
}

// Not a stream: a CPU backend that looked at it would crash or fail.
void* const kNotAStream = reinterpret_cast<void*>(uintptr_t{0x5173});

TEST(CallerStreamCpu, IgnoredSameBits) {
  Context ctx(MPI_COMM_WORLD, MeshConfig{}, BackendKind::kCpu, OverlapOptions{});
  const int tp = ctx.comms().tp();
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kNone}) {
    GemmPlan plan(ctx, tensor_sequence_parallel_gemm(ctx, "stream_cpu", op, 2, 4 * tp, 8 * tp,
                                                     6 * tp, DType::kFloat32, true, false));
    const std::vector<float> x = random_values(num_elements(plan.lhs_local()), 1);
    const std::vector<float> w = random_values(num_elements(plan.rhs_local()), 2);
    const std::vector<float> b = random_values(num_elements(plan.bias_local()), 3);
    const auto out_count = static_cast<size_t>(num_elements(plan.out_local()));
    std::vector<float> got(out_count);
    // Each path against its own call without a stream, into NaN-poisoned outputs, every
    // element of which must be written.
    for (int path = 0; path < 3; ++path) {
      std::fill(got.begin(), got.end(), std::nanf(""));
      const Operands ops(x.data(), w.data(), b.data(), got.data());
      if (path == 0) plan.execute(ops, kNotAStream);
      if (path == 1) plan.execute_overlapped(ops, kNotAStream);
      if (path == 2) plan.execute_sequential(ops, kNotAStream);
      std::vector<float> ref(out_count, std::nanf(""));
      const Operands ref_ops(x.data(), w.data(), b.data(), ref.data());
      if (path == 0) plan.execute(ref_ops);
      if (path == 1) plan.execute_overlapped(ref_ops);
      if (path == 2) plan.execute_sequential(ref_ops);
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), out_count * sizeof(float)), 0)
          << plan.desc().name << " " << collective_name(op) << " path " << path;
      EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return std::isfinite(v); }))
          << collective_name(op) << " path " << path << ": unwritten elements";
    }
  }
}

TEST(CallerStreamCpu, BorrowedNcclRefused) {
  BackendOptions b;
  b.kind = BackendKind::kCpu;
  b.nccl_comm = reinterpret_cast<void*>(uintptr_t{0x4e43});  // never looked at
  try {
    Context ctx(MPI_COMM_WORLD, MeshConfig{}, b, OverlapOptions{});
    ADD_FAILURE() << "a borrowed NCCL communicator was accepted by the CPU backend";
  } catch (const BackendRuleError& e) {
    EXPECT_NE(std::string(e.what()).find("a borrowed NCCL communicator needs the CUDA backend"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cgemm
