// The GEMM layouts of a training step's backward pass (issue 24) as plain GEMMs (collective
// none): wgrad's transposed lhs contracting two dims (x [B, S, H]^T dy [B, S, N]), lhs [K, M],
// rhs [N, K], an N-D rhs (runtime/src/plan/gemm_layout.hpp); the all-gather and reduce-scatter
// GEMMs on an N-D rhs and several contracting dims, the reduce-scatter on a transposed lhs, both
// of their paths (issue 43 item 1); the
// all-gather GEMM reduced over dp (item 2). Under mpirun on 1 rank, dp 2, tp 3 and dp 2 x tp 2,
// on the CPU backend or, with CGEMM_TEST_BACKEND=cuda, the CUDA backend (ranks sharing the GPU;
// skipped where a rank has none). Each against an fp64 reference of the global output computed
// here from the same global inputs, fresh random each run, outputs poisoned with NaN. Layouts
// that do not run are refused with one clear message.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/backend_buffer.hpp"
#include "../support/global_tensors.hpp"
#include "../support/test_backend.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

using test::shard;

std::unique_ptr<Context> g_ctx;
std::unique_ptr<Context> g_ctx_pieces;  // the same mesh with chunks_per_rank 2
bool g_cuda = false;  // CGEMM_TEST_BACKEND=cuda: the CUDA backend, ranks sharing the GPU
uint32_t g_seed = 0;  // rank 0's, broadcast: every rank builds the same global tensors

SpecEntry none() { return SpecEntry::none(); }
SpecEntry dp() { return SpecEntry::axis("dp"); }
SpecEntry tpsp() { return SpecEntry::axis("tpsp"); }

// A global tensor of this run's seed (global_tensors.hpp).
std::vector<double> random_tensor(const Shape& s, DType dtype, uint32_t stream) {
  return test::random_tensor(s, dtype, g_seed, stream);
}

// An operand as the test reads it: [rows, cols] = [M or N, K] whatever the storage, with the
// contracting dims flattened in storage order (gemm.py's lowering): leading contracting dims
// store [K, rows], trailing ones [rows, K].
struct Flat {
  int64_t rows = 1, k = 1;
  bool leading = false;
  double at(const std::vector<double>& v, int64_t r, int64_t p) const {
    return v[static_cast<size_t>(leading ? p * rows + r : r * k + p)];
  }
};

Flat flat(const Shape& s, const std::vector<int>& cdims) {
  Flat f;
  std::vector<bool> c(s.size(), false);
  for (int d : cdims) c[static_cast<size_t>(d < 0 ? d + static_cast<int>(s.size()) : d)] = true;
  for (size_t d = 0; d < s.size(); ++d) (c[d] ? f.k : f.rows) *= s[d];
  f.leading = c[0] && !c[s.size() - 1];
  return f;
}

struct Case {
  GemmDesc desc;
  double tolerance = 1e-5;  // of sum |lhs| |rhs| per output element
};

GemmDesc layout_desc(std::string name, Shape lhs, PartitionSpec lhs_spec, Shape rhs,
                     PartitionSpec rhs_spec, ContractingDims dims, DType dtype = DType::kFloat32) {
  GemmDesc d;
  d.name = std::move(name);
  d.lhs_shape = std::move(lhs);
  d.rhs_shape = std::move(rhs);
  d.lhs_spec = std::move(lhs_spec);
  d.rhs_spec = std::move(rhs_spec);
  d.contracting_dims = std::move(dims);
  d.dtype = d.out_dtype = dtype;
  return d;
}

// Plans and runs `desc`, checks this rank's output shard against the fp64 reference of the
// global output, and returns the plan's description for further checks.
PlanDescription run_and_check(const GemmDesc& desc, double tolerance, Context* ctx = nullptr) {
  GemmPlan plan(ctx != nullptr ? *ctx : *g_ctx, desc);
  const DType in = desc.dtype, out_t = desc.out_dtype;
  const auto lhs = random_tensor(desc.lhs_shape, in, 1);
  const auto rhs = random_tensor(desc.rhs_shape, in, 2);
  const Flat a = flat(desc.lhs_shape, desc.contracting_dims.first);
  const Flat b = flat(desc.rhs_shape, desc.contracting_dims.second);
  EXPECT_EQ(a.k, b.k);
  std::vector<double> bias;
  if (desc.bias_shape) bias = random_tensor(*desc.bias_shape, out_t, 3);

  // The reference: out [M, N] row-major is the output [lhs kept..., rhs kept...].
  EXPECT_EQ(num_elements(plan.out_global()), a.rows * b.rows);
  std::vector<double> ref(static_cast<size_t>(a.rows * b.rows)), mag(ref.size());
  for (int64_t i = 0; i < a.rows; ++i) {
    for (int64_t j = 0; j < b.rows; ++j) {
      double s = 0.0, m = 0.0;
      for (int64_t p = 0; p < a.k; ++p) {
        const double x = a.at(lhs, i, p) * b.at(rhs, j, p);
        s += x;
        m += std::fabs(x);
      }
      if (!bias.empty()) s += bias[static_cast<size_t>(j)];
      ref[static_cast<size_t>(i * b.rows + j)] = s;
      mag[static_cast<size_t>(i * b.rows + j)] = m;
    }
  }

  Backend& be = g_ctx->backend();
  const test::BackendBuffer lhs_local(
      be, shard(lhs, desc.lhs_shape, plan.lhs_offset(), plan.lhs_local()), in);
  const test::BackendBuffer rhs_local(
      be, shard(rhs, desc.rhs_shape, plan.rhs_offset(), plan.rhs_local()), in);
  std::unique_ptr<test::BackendBuffer> bias_local;
  if (!bias.empty()) {
    bias_local = std::make_unique<test::BackendBuffer>(
        be, shard(bias, *desc.bias_shape, plan.bias_offset(), plan.bias_local()), out_t);
  }
  const int64_t out_n = num_elements(plan.out_local());
  const auto want = shard(ref, plan.out_global(), plan.out_offset(), plan.out_local());
  const auto scale = shard(mag, plan.out_global(), plan.out_offset(), plan.out_local());
  // cuBLASLt's float32 GEMMs may round their inputs (TF32) or accumulate in another order; a
  // layout fault is off by the whole value.
  tolerance = std::max(tolerance, g_cuda ? 1e-3 : 0.0);
  // A collective GEMM runs both its paths: the overlapped ring and the sequential collective.
  for (const bool overlapped : {true, false}) {
    if (!overlapped && desc.collective == CollectiveOp::kNone) continue;
    const char* path = overlapped ? "overlapped" : "sequential";
    test::BackendBuffer out(be, static_cast<size_t>(out_n) * dtype_size(out_t));  // NaN
    const void* b = bias_local ? bias_local->get() : nullptr;
    if (overlapped) {
      plan.execute_overlapped(lhs_local.get(), rhs_local.get(), b, out.get());
    } else {
      plan.execute_sequential(lhs_local.get(), rhs_local.get(), b, out.get());
    }
    const std::vector<double> got = out.values_back(out_t);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(got[i] - want[i]);
      if (!(err <= tolerance * scale[i] + 1e-6) && bad++ < 5) {
        ADD_FAILURE() << desc.name << " (" << path << "): out[" << i << "] = " << got[i]
                      << ", reference " << want[i];
      }
    }
    EXPECT_EQ(bad, 0) << desc.name << " (" << path << "): " << plan.schedule_summary();
  }
  return plan.description();
}

// wgrad: dW [H, N] = x^T dy, x [B, S, H] and dy [B, S, N] contracting (0, 1) on both sides.
TEST(GemmLayouts, WgradContractsTheLeadingDimsOfBoth) {
  // x and dy replicated, dW split on tp by dy's columns: no reduction.
  const auto d = run_and_check(layout_desc("wgrad", {4, 6, 8}, {none(), none(), none()}, {4, 6, 12},
                                           {none(), none(), tpsp()}, {{0, 1}, {0, 1}}),
                               1e-5);
  EXPECT_FALSE(d.sharding.reduce_spec.has_value());
  EXPECT_EQ(d.out_global, (Shape{8, 12}));
  ASSERT_EQ(d.sequential.gemms.size(), 1u);
  EXPECT_TRUE(d.sequential.gemms[0].task.lhs_transposed);
  EXPECT_FALSE(d.sequential.gemms[0].task.rhs_transposed);
  EXPECT_EQ(d.sequential.gemms[0].task.k, 24);
}

TEST(GemmLayouts, WgradOfASequenceParallelLayerAllReducesOverTp) {
  // Sequence-parallel x and dy: the planner reduces dW over tpsp; the plain GEMM all-reduces.
  GemmDesc desc = layout_desc("wgrad sp", {2, 12, 6}, {none(), tpsp(), none()}, {2, 12, 4},
                              {none(), tpsp(), none()}, {{0, 1}, {0, 1}}, DType::kBFloat16);
  desc.out_dtype = DType::kFloat32;
  const auto d = run_and_check(desc, 1e-5);
  ASSERT_TRUE(d.sharding.reduce_spec.has_value());
  EXPECT_TRUE(d.sharding.reduce_spec->is_axis("tpsp"));
}

TEST(GemmLayouts, WgradReducedOverDp) {
  // x and dy batch-sharded on dp: the planner reduces dW over dp (issue 43 item 2), the plain
  // GEMM all-reduces over the dp group.
  const GemmDesc desc = layout_desc("wgrad dp", {4, 6, 8}, {dp(), none(), none()}, {4, 6, 10},
                                    {dp(), none(), none()}, {{0, 1}, {0, 1}});
  const auto d = run_and_check(desc, 1e-5);
  ASSERT_TRUE(d.sharding.reduce_spec.has_value());
  EXPECT_TRUE(d.sharding.reduce_spec->is_axis("dp"));
}

TEST(GemmLayouts, ContractionOverDpWithBias) {
  // K sharded over dp on both sides: each dp rank multiplies its K slice, the all-reduce over
  // dp sums them, then the bias is added once (gemm.py: psum, then bias).
  GemmDesc desc =
      layout_desc("k over dp", {8, 12}, {none(), dp()}, {12, 6}, {dp(), none()}, {{1}, {0}});
  desc.bias_shape = Shape{6};
  desc.bias_spec = {none()};
  const auto d = run_and_check(desc, 1e-5);
  ASSERT_TRUE(d.sharding.reduce_spec.has_value());
  EXPECT_TRUE(d.sharding.reduce_spec->is_axis("dp"));
}

TEST(GemmLayouts, TransposedLhs) {
  // lhs [K, M] contracting dim 0 with rhs [K, N].
  const auto d = run_and_check(
      layout_desc("lhs km", {12, 8}, {none(), dp()}, {12, 6}, {none(), tpsp()}, {{0}, {0}}), 1e-5);
  EXPECT_TRUE(d.sequential.gemms.at(0).task.lhs_transposed);
}

TEST(GemmLayouts, TransposedRhs) {
  // lhs [M, K] with rhs [N, K], both contracting their last dim.
  const auto d = run_and_check(
      layout_desc("rhs nk", {8, 12}, {dp(), none()}, {6, 12}, {tpsp(), none()}, {{1}, {-1}}), 1e-5);
  EXPECT_FALSE(d.sequential.gemms.at(0).task.lhs_transposed);
  EXPECT_TRUE(d.sequential.gemms.at(0).task.rhs_transposed);
}

TEST(GemmLayouts, ThreeDimensionalRhsWithBias) {
  // lhs [B, S, K] with rhs [K, N1, N2]: the output [B, S, N1, N2], the bias [N1, N2].
  GemmDesc desc = layout_desc("rhs 3d", {2, 4, 12}, {dp(), none(), none()}, {12, 6, 3},
                              {none(), tpsp(), none()}, {{2}, {0}});
  desc.bias_shape = Shape{6, 3};
  desc.bias_spec = {tpsp(), none()};
  const auto d = run_and_check(desc, 1e-5);
  EXPECT_EQ(d.out_global, (Shape{2, 4, 6, 3}));
}

TEST(GemmLayouts, BothTransposedWithTwoContractingDims) {
  // lhs [K1, K2, M] contracting (0, 1) with rhs [N, K1, K2] contracting (1, 2).
  const auto d = run_and_check(layout_desc("both transposed", {3, 4, 8}, {none(), none(), dp()},
                                           {6, 3, 4}, {tpsp(), none(), none()}, {{0, 1}, {1, 2}}),
                               1e-5);
  EXPECT_TRUE(d.sequential.gemms.at(0).task.lhs_transposed);
  EXPECT_TRUE(d.sequential.gemms.at(0).task.rhs_transposed);
}

TEST(GemmLayouts, AnOperandContractingEveryDim) {
  // A vector lhs [K] (M = 1) with rhs [K, N].
  auto d = run_and_check(
      layout_desc("vector lhs", {12}, {none()}, {12, 6}, {none(), tpsp()}, {{0}, {0}}), 1e-5);
  EXPECT_EQ(d.out_global, (Shape{6}));
  // lhs [M, K1, K2] with rhs [K1, K2] (N = 1): the output [M].
  d = run_and_check(layout_desc("vector rhs", {8, 3, 4}, {dp(), none(), none()}, {3, 4},
                                {none(), none()}, {{1, 2}, {0, 1}}),
                    1e-5);
  EXPECT_EQ(d.out_global, (Shape{8}));
  // Both: a dot product, the output a scalar.
  d = run_and_check(
      layout_desc("dot", {4, 3}, {none(), none()}, {4, 3}, {none(), none()}, {{0, 1}, {0, 1}}),
      1e-5);
  EXPECT_EQ(d.out_global, Shape{});
}

// The message of the Error `desc` is refused with at planning.
std::string refusal(const GemmDesc& desc) {
  try {
    GemmPlan plan(*g_ctx, desc);
  } catch (const Error& e) {
    return e.what();
  }
  return "(planned)";
}

TEST(GemmLayouts, ContractingDimsInTheMiddleAreRefused) {
  const std::string msg = refusal(layout_desc("middle", {4, 12, 2}, {none(), none(), none()},
                                              {12, 6}, {none(), none()}, {{1}, {0}}));
  EXPECT_NE(msg.find("GEMM 'middle': the runtime runs the GEMM as one 2-D GEMM"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("lhs [4, 12, 2] contracting (1,), rhs [12, 6] contracting (0,)"),
            std::string::npos)
      << msg;
  // Also on the rhs.
  const std::string rhs_msg = refusal(layout_desc(
      "rhs middle", {4, 12}, {none(), none()}, {2, 12, 6}, {none(), none(), none()}, {{1}, {1}}));
  EXPECT_NE(rhs_msg.find("leading or its trailing dims"), std::string::npos) << rhs_msg;
}

// Found by review: the runtime contracts each operand's contracting dims flattened in storage
// order, so those dims must pair as jax.lax.dot_general pairs them (by list position) and be
// sharded alike; before these checks each case below planned and gave a wrong output.
TEST(GemmLayouts, ContractingDimsOutOfStorageOrderAreRefused) {
  // lhs contracting (0, 1) with rhs (1, 0): dot_general pairs lhs dim 0 with rhs dim 1.
  const std::string msg =
      refusal(layout_desc("order", {2, 3, 5}, {none(), none(), none()}, {3, 2, 4},
                          {none(), none(), none()}, {{0, 1}, {1, 0}}));
  EXPECT_NE(msg.find("list each operand's contracting dims in the order they are stored"),
            std::string::npos)
      << msg;
}

TEST(GemmLayouts, PairedContractingDimsOfDifferentSizesAreRefused) {
  // Products agree (6 = 6), as gemm.py checks; the dims pair 2 with 3.
  const std::string msg =
      refusal(layout_desc("sizes", {2, 3, 5}, {none(), none(), none()}, {3, 2, 4},
                          {none(), none(), none()}, {{0, 1}, {0, 1}}));
  EXPECT_NE(msg.find("contracting dim 0 has size 2 on the lhs (dim 0) and 3 on the rhs (dim 0)"),
            std::string::npos)
      << msg;
}

TEST(GemmLayouts, PairedContractingDimsShardedDifferentlyAreRefused) {
  // The lhs shards its first contracting dim on tp, the rhs its second: the planner reduces
  // over tpsp and accepts both specs, but each rank's local K slices would not pair.
  const std::string msg =
      refusal(layout_desc("shards", {6, 6, 6}, {none(), tpsp(), none()}, {6, 6, 10},
                          {none(), tpsp(), none()}, {{1, 2}, {0, 1}}));
  EXPECT_NE(msg.find("contracting dim 0 is sharded as ('tpsp',) on the lhs and (None,) on the rhs"),
            std::string::npos)
      << msg;
}

TEST(GemmLayouts, AMeshAxisNamedTwiceIsRefused) {
  const std::string msg = refusal(
      layout_desc("twice", {4, 4, 6}, {dp(), dp(), none()}, {6, 5}, {none(), none()}, {{2}, {0}}));
  EXPECT_NE(msg.find("names mesh axis 'dp' more than once"), std::string::npos) << msg;
}

TEST(GemmLayouts, AWronglyShapedBiasGetsTheShapeError) {
  // Before: the bias spec check came first and asked for a spec the caller had given.
  GemmDesc desc =
      layout_desc("bias shape", {4, 12}, {none(), none()}, {12, 6}, {none(), none()}, {{1}, {0}});
  desc.bias_shape = Shape{1, 6};
  desc.bias_spec = {none()};
  const std::string msg = refusal(desc);
  EXPECT_NE(msg.find("bias tensor has incorrect shape"), std::string::npos) << msg;
}

TEST(GemmLayouts, NonConsecutiveContractingDimsAreGemmPysRefusal) {
  const std::string msg =
      refusal(layout_desc("gaps", {3, 4, 2}, {none(), none(), none()}, {3, 2, 5},
                          {none(), none(), none()}, {{0, 2}, {0, 1}}));
  EXPECT_NE(msg.find("consecutive contracting dimensions for LHS operand"), std::string::npos)
      << msg;
}

// Issue 43 item 1: the collective GEMMs on the layouts gemm.py runs them on besides lhs [B, S, K]
// with a 2-D rhs. Shapes divide by tp 2 and 3 and by dp 2 (np 1, 2, 3, 4).
GemmDesc collective_desc(std::string name, CollectiveOp op, Shape lhs, PartitionSpec lhs_spec,
                         Shape rhs, PartitionSpec rhs_spec, ContractingDims dims) {
  GemmDesc d = layout_desc(std::move(name), std::move(lhs), std::move(lhs_spec), std::move(rhs),
                           std::move(rhs_spec), std::move(dims));
  d.collective = op;
  return d;
}

TEST(GemmLayouts, AllGatherWithTheGatedMlpKernel) {
  // TE's layernorm_mlp kernel [K, 2, N] sharded on N (column-parallel), its bias [2, N]: the
  // output [B, S, 2, N/tp] after the all-gather of x's sequence.
  GemmDesc desc =
      collective_desc("ag gated", CollectiveOp::kAllGather, {2, 12, 8}, {dp(), tpsp(), none()},
                      {8, 2, 6}, {none(), none(), tpsp()}, {{2}, {0}});
  desc.bias_shape = Shape{2, 6};
  desc.bias_spec = {none(), tpsp()};
  const auto d = run_and_check(desc, 1e-5);
  EXPECT_EQ(d.out_global, (Shape{2, 12, 2, 6}));
  // Sequence-first activations [S, B, K] too.
  desc.name = "ag gated sbk";
  desc.lhs_shape = {12, 2, 8};
  desc.lhs_spec = {tpsp(), dp(), none()};
  desc.transpose_batch_sequence = true;
  run_and_check(desc, 1e-5);
}

TEST(GemmLayouts, AllGatherContractingTwoDims) {
  // lhs [B, S, H, D] contracting (2, 3) with rhs [H, D, N]: K = H D.
  GemmDesc desc = collective_desc("ag 4d", CollectiveOp::kAllGather, {2, 12, 3, 4},
                                  {dp(), tpsp(), none(), none()}, {3, 4, 6},
                                  {none(), none(), tpsp()}, {{2, 3}, {0, 1}});
  run_and_check(desc, 1e-5);
  // And a transposed rhs [N, 2, H, D] contracting (2, 3).
  desc.name = "ag 4d rhs nk";
  desc.rhs_shape = {6, 2, 3, 4};
  desc.rhs_spec = {tpsp(), none(), none(), none()};
  desc.contracting_dims = {{2, 3}, {2, 3}};
  const auto d = run_and_check(desc, 1e-5);
  EXPECT_EQ(d.out_global, (Shape{2, 12, 6, 2}));
}

TEST(GemmLayouts, ReduceScatterContractingTwoDims) {
  // Row-parallel over heads: lhs [B, S, H, D] with H on tp, rhs [H, D, N]; the partial sums
  // scattered over the sequence, then the bias.
  GemmDesc desc = collective_desc("rs 4d", CollectiveOp::kReduceScatter, {2, 12, 6, 2},
                                  {dp(), none(), tpsp(), none()}, {6, 2, 5},
                                  {tpsp(), none(), none()}, {{2, 3}, {0, 1}});
  desc.bias_shape = Shape{5};
  desc.bias_spec = {none()};
  const auto d = run_and_check(desc, 1e-5);
  EXPECT_EQ(d.out_global, (Shape{2, 12, 5}));
}

TEST(GemmLayouts, ReduceScatterWithAThreeDimensionalRhs) {
  // rhs [K, 2, N]: the output [B, S, 2, N] scattered over S; sequence-first as well.
  GemmDesc desc =
      collective_desc("rs rhs 3d", CollectiveOp::kReduceScatter, {2, 12, 6}, {dp(), none(), tpsp()},
                      {6, 2, 4}, {tpsp(), none(), none()}, {{2}, {0}});
  desc.bias_shape = Shape{2, 4};
  desc.bias_spec = {none(), none()};
  run_and_check(desc, 1e-5);
  desc.name = "rs rhs 3d sbk";
  desc.lhs_shape = {12, 2, 6};
  desc.lhs_spec = {none(), dp(), tpsp()};
  desc.transpose_batch_sequence = true;
  run_and_check(desc, 1e-5);
}

TEST(GemmLayouts, CollectivesOnTheNewLayoutsInFp8) {
  // Current scaling (the CPU backend's FP8 emulation): the quantized copies flatten K and N as
  // the GEMM does; within e4m3's 1/4 of the magnitudes (QuantizedLayoutsMatchTheTwoDimensional).
  GemmDesc ag =
      collective_desc("fp8 ag gated", CollectiveOp::kAllGather, {2, 12, 32}, {dp(), tpsp(), none()},
                      {32, 2, 48}, {none(), none(), tpsp()}, {{2}, {0}});
  ag.quantization.mode = ScalingMode::kCurrentTensorScaling;
  run_and_check(ag, 0.25);
  GemmDesc rs = collective_desc("fp8 rs 4d", CollectiveOp::kReduceScatter, {2, 12, 6, 16},
                                {dp(), none(), tpsp(), none()}, {6, 16, 16},
                                {tpsp(), none(), none()}, {{2, 3}, {0, 1}});
  rs.quantization.mode = ScalingMode::kCurrentTensorScaling;
  run_and_check(rs, 0.25);
}

TEST(GemmLayouts, AllGatherReducedOverDp) {
  // Issue 43 item 2: K sharded over dp on both operands while the all-gather gathers the
  // sequence over tp. gemm.py psums the output over dp (in float32), then adds the bias; the
  // planner replicates the rhs's N here (gemm.py gathers an rhs non-contracting dim whose axis
  // the lhs's non-contracting dims hold).
  GemmDesc desc = collective_desc("ag over dp", CollectiveOp::kAllGather, {2, 12, 8},
                                  {none(), tpsp(), dp()}, {8, 6}, {dp(), none()}, {{2}, {0}});
  desc.bias_shape = Shape{6};
  desc.bias_spec = {none()};
  auto d = run_and_check(desc, 1e-5);
  ASSERT_TRUE(d.sharding.reduce_spec.has_value());
  EXPECT_TRUE(d.sharding.reduce_spec->is_axis("dp"));
  run_and_check(desc, 1e-5, g_ctx_pieces.get());  // chunks_per_rank 2
  // bf16 in and out: each rank's output rounded to bf16, summed in float32 (gemm.py's
  // is_all_reduce_in_float32), rounded again; sequence-first activations.
  desc.name = "ag over dp bf16";
  desc.dtype = desc.out_dtype = DType::kBFloat16;
  desc.lhs_shape = {12, 2, 8};
  desc.lhs_spec = {tpsp(), none(), dp()};
  desc.transpose_batch_sequence = true;
  d = run_and_check(desc, 2e-2);
  EXPECT_NE(d.schedule_summary.find("all-reduce over ('dp',)"), std::string::npos)
      << d.schedule_summary;
}

// The value of `x` in bf16 (through float, as the CPU backend rounds).
double bf16(double x) {
  const auto f = static_cast<float>(x);
  uint16_t b = 0;
  float r = 0.0f;
  convert_from_float(&f, &b, DType::kBFloat16, 1);
  convert_to_float(&b, DType::kBFloat16, &r, 1);
  return r;
}

// Found by review: the bf16 case above cannot tell which roundings ran. gemm.py's: each dp
// rank's output rounded to bf16, those summed in float32 and rounded, then the bias added in
// bf16. The CPU backend's GEMM accumulates in fp64 and rounds once, so the bits are known here.
TEST(GemmLayouts, AllGatherOverDpRoundsAsGemmPy) {
  if (g_cuda) GTEST_SKIP() << "cuBLASLt's accumulation order is its own";
  GemmDesc desc = collective_desc("ag over dp bits", CollectiveOp::kAllGather, {2, 12, 16},
                                  {none(), tpsp(), dp()}, {16, 6}, {dp(), none()}, {{2}, {0}});
  desc.dtype = desc.out_dtype = DType::kBFloat16;
  desc.bias_shape = Shape{6};
  desc.bias_spec = {none()};
  GemmPlan plan(*g_ctx, desc);
  const int64_t k = 16, n = 6, rows = 2 * 12, k_local = plan.lhs_local()[2];
  const auto lhs = random_tensor(desc.lhs_shape, DType::kBFloat16, 11);
  const auto rhs = random_tensor(desc.rhs_shape, DType::kBFloat16, 12);
  const auto bias = random_tensor({n}, DType::kBFloat16, 13);
  std::vector<double> ref(static_cast<size_t>(rows * n));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;  // the float32 all-reduce, in dp rank order
      for (int64_t d0 = 0; d0 < k; d0 += k_local) {
        double part = 0.0;
        for (int64_t p = d0; p < d0 + k_local; ++p) {
          part += lhs[static_cast<size_t>(i * k + p)] * rhs[static_cast<size_t>(p * n + j)];
        }
        sum += static_cast<float>(bf16(part));
      }
      ref[static_cast<size_t>(i * n + j)] = bf16(bf16(sum) + bias[static_cast<size_t>(j)]);
    }
  }
  Backend& be = g_ctx->backend();
  const test::BackendBuffer a(be, shard(lhs, desc.lhs_shape, plan.lhs_offset(), plan.lhs_local()),
                              DType::kBFloat16);
  const test::BackendBuffer b(be, shard(rhs, desc.rhs_shape, plan.rhs_offset(), plan.rhs_local()),
                              DType::kBFloat16);
  const test::BackendBuffer c(be, bias, DType::kBFloat16);
  const auto want = shard(ref, plan.out_global(), plan.out_offset(), plan.out_local());
  for (const bool overlapped : {true, false}) {
    test::BackendBuffer out(be, want.size() * 2);  // NaN
    if (overlapped) {
      plan.execute_overlapped(a.get(), b.get(), c.get(), out.get());
    } else {
      plan.execute_sequential(a.get(), b.get(), c.get(), out.get());
    }
    const std::vector<double> got = out.values_back(DType::kBFloat16);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i] && bad++ < 5) {
        ADD_FAILURE() << (overlapped ? "overlapped" : "sequential") << ": out[" << i
                      << "] = " << got[i] << ", gemm.py's roundings give " << want[i];
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(GemmLayouts, ReduceScatterWithATransposedLhs) {
  // lhs [K, S, B] sequence-first, K on tp: each destination's rows are a column block of it.
  GemmDesc desc = collective_desc("rs km sbk", CollectiveOp::kReduceScatter, {12, 12, 2},
                                  {tpsp(), none(), dp()}, {12, 4}, {tpsp(), none()}, {{0}, {0}});
  desc.transpose_batch_sequence = true;
  desc.bias_shape = Shape{4};
  desc.bias_spec = {none()};
  auto d = run_and_check(desc, 1e-5);
  EXPECT_EQ(d.out_global, (Shape{12, 2, 4}));
  // Batch-first with a batch of 1: lhs [K, 1, S].
  desc = collective_desc("rs km b1", CollectiveOp::kReduceScatter, {12, 1, 12},
                         {tpsp(), none(), none()}, {12, 4}, {tpsp(), none()}, {{0}, {0}});
  run_and_check(desc, 1e-5);
  // In pieces (chunks_per_rank 2): each piece a narrower column block.
  desc.name = "rs km b1 pieces";
  run_and_check(desc, 1e-5, g_ctx_pieces.get());
  // FP8: the quantized copy is [M, K], the usual case.
  GemmDesc fp8 = collective_desc("fp8 rs km", CollectiveOp::kReduceScatter, {96, 12, 2},
                                 {tpsp(), none(), dp()}, {96, 16}, {tpsp(), none()}, {{0}, {0}});
  fp8.transpose_batch_sequence = true;
  fp8.quantization.mode = ScalingMode::kCurrentTensorScaling;
  run_and_check(fp8, 0.25);
  // FP8 batch-first [K, B, S] with a local batch of 2: the copy [B, S, K] is reordered as usual.
  fp8.name = "fp8 rs km b2";
  fp8.lhs_shape = {96, 2, 12};
  fp8.lhs_spec = {tpsp(), none(), none()};
  fp8.transpose_batch_sequence = false;
  run_and_check(fp8, 0.25);
}

TEST(GemmLayouts, TransposedLhsRefusals) {
  // The all-gather's ring moves lhs rows: lhs [K, S] has none.
  GemmDesc ag = collective_desc("ag km", CollectiveOp::kAllGather, {6, 12}, {none(), tpsp()},
                                {6, 12}, {none(), tpsp()}, {{0}, {0}});
  std::string msg = refusal(ag);
  EXPECT_NE(msg.find("GEMM 'ag km': the runtime runs all_gather GEMMs on an lhs [B, S, K...] "
                     "contracting its trailing dims (the ring moves its rows); a transposed lhs "
                     "(contracting its leading dims) is not run: got lhs [6, 12] contracting (0,)"),
            std::string::npos)
      << msg;
  // The reduce-scatter's batch-first lhs [K, B, S] with a local batch of 2.
  GemmDesc rs = collective_desc("rs km b2", CollectiveOp::kReduceScatter, {12, 2, 12},
                                {tpsp(), none(), none()}, {12, 4}, {tpsp(), none()}, {{0}, {0}});
  msg = refusal(rs);
  EXPECT_NE(msg.find("batch-first with a local batch of 2 is not run"), std::string::npos) << msg;
}

// Runs `desc` (replicated specs: every rank holds the whole operands) on global float32 lhs
// and rhs; returns the output, poisoned with NaN before the run.
std::vector<float> run_replicated(const GemmDesc& desc, const std::vector<double>& lhs,
                                  const std::vector<double>& rhs) {
  GemmPlan plan(*g_ctx, desc);
  Backend& be = g_ctx->backend();
  const test::BackendBuffer a(be, lhs, DType::kFloat32), b(be, rhs, DType::kFloat32);
  test::BackendBuffer out(be, static_cast<size_t>(num_elements(plan.out_local())) * 4);  // NaN
  plan.execute(a.get(), b.get(), nullptr, out.get());
  const std::vector<double> v = out.values_back(DType::kFloat32);
  return {v.begin(), v.end()};
}

// A quantized GEMM quantizes a transposed lhs into its [M, K] copy, and flattens several
// contracting dims and an N-D rhs as the 2-D GEMM does: the same quantized values, so the
// same output bit for bit as the 2-D NN GEMM on the same memory, and near the fp64 product.
TEST(GemmLayouts, QuantizedLayoutsMatchTheTwoDimensionalGemm) {
  const int64_t m = 16, k = 64, n = 16;
  const PartitionSpec r2{none(), none()}, r4{none(), none(), none(), none()};
  for (ScalingMode mode : {ScalingMode::kCurrentTensorScaling, ScalingMode::kMxfp8_1d}) {
    if (g_cuda && mode == ScalingMode::kMxfp8_1d) continue;  // CPU emulation only
    SCOPED_TRACE(scaling_mode_name(mode));
    GemmDesc mk = layout_desc("fp8 mk", {m, k}, r2, {k, n}, r2, {{1}, {0}});
    mk.quantization.mode = mode;
    GemmDesc km = mk;
    km.name = "fp8 km";
    km.lhs_shape = {k, m};
    km.contracting_dims = {{0}, {0}};
    // lhs [2, 8, 2, 32] contracting (2, 3), rhs [2, 32, 4, 4] contracting (0, 1): the same
    // memory as mk's [16, 64] and [64, 16].
    GemmDesc nd = mk;
    nd.name = "fp8 nd";
    nd.lhs_shape = {2, 8, 2, 32};
    nd.lhs_spec = r4;
    nd.rhs_shape = {2, 32, 4, 4};
    nd.rhs_spec = r4;
    nd.contracting_dims = {{2, 3}, {0, 1}};

    const auto lhs = random_tensor({m, k}, DType::kFloat32, 4);
    const auto rhs = random_tensor({k, n}, DType::kFloat32, 5);
    std::vector<double> lhs_km(lhs.size());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        lhs_km[static_cast<size_t>(p * m + i)] = lhs[static_cast<size_t>(i * k + p)];
      }
    }
    const auto out = run_replicated(mk, lhs, rhs);
    const auto out_km = run_replicated(km, lhs_km, rhs);
    const auto out_nd = run_replicated(nd, lhs, rhs);
    ASSERT_EQ(out.size(), static_cast<size_t>(m * n));
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_FALSE(std::isnan(out[i])) << i;
      // cuBLASLt may pick another algorithm per plan: the same sum in another order.
      const float slack = g_cuda ? 1e-5f * (std::fabs(out[i]) + 1.0f) : 0.0f;
      ASSERT_NEAR(out_km[i], out[i], slack) << i;
      ASSERT_NEAR(out_nd[i], out[i], slack) << i;
    }
    // e4m3 keeps 3 mantissa bits: each operand within 1/16, the sum within 1/4 of the
    // magnitudes.
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double x =
              lhs[static_cast<size_t>(i * k + p)] * rhs[static_cast<size_t>(p * n + j)];
          sum += x;
          mag += std::fabs(x);
        }
        EXPECT_NEAR(out[static_cast<size_t>(i * n + j)], sum, mag / 4) << i << ", " << j;
      }
    }
  }
}

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  cgemm::g_seed = std::random_device{}();
  MPI_Bcast(&cgemm::g_seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  const int dp = world % 2 == 0 ? 2 : 1;
  const std::optional<cgemm::BackendOptions> backend = cgemm::test::backend_from_env();
  if (!backend) {
    if (rank == 0) std::printf("CGEMM_TEST_BACKEND=cuda, but some rank has no GPU: skipped\n");
    MPI_Finalize();
    return 0;
  }
  cgemm::g_cuda = backend->kind == cgemm::BackendKind::kCuda;
  if (rank == 0) {
    std::printf("seed %u, dp %d x tp %d, backend %s\n", cgemm::g_seed, dp, world / dp,
                cgemm::test::backend_word(*backend));
  }
  cgemm::g_ctx = std::make_unique<cgemm::Context>(
      MPI_COMM_WORLD, cgemm::MeshConfig{.dp = dp, .tp = 0}, *backend, cgemm::OverlapOptions{});
  cgemm::OverlapOptions pieces;
  pieces.chunks_per_rank = 2;
  cgemm::g_ctx_pieces = std::make_unique<cgemm::Context>(
      MPI_COMM_WORLD, cgemm::MeshConfig{.dp = dp, .tp = 0}, *backend, pieces);
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx_pieces.reset();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
