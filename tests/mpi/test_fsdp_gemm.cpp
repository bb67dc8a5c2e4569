// FSDP in the runtime (runtime/src/fsdp/fsdp_gather.hpp): a weight given sharded over the fsdp
// axis where gemm.py's rule gathers it is gathered inside the GEMM, over the fsdp group. Run
// under mpirun on the mesh given as --dp D --fsdp F (tp = world / (D F)), on the backend of
// CGEMM_TEST_BACKEND (cpu by default; cuda on the GPU machine, ranks sharing the GPU).
//
// Each case draws fresh random global tensors (never zero), poisons the output with NaN, and
// checks this rank's output shard against an fp64 reference of the global GEMM, on both paths
// (the overlapped one's exchanges and the sequential one's all-gather: byte-identical on the CPU
// backend, and at tp 1 on CUDA), and against the same GEMM planned with the whole weight passed
// in (the FSDP plan runs the same GEMMs on the same bytes, split by output columns:
// byte-identical on the CPU backend). The layouts it does not run are refused with one message.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/error_of.hpp"
#include "../support/global_tensors.hpp"
#include "../support/test_backend.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/gradient_buckets.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

using test::error_of;
using test::shard;

// A global tensor of this run's seed (global_tensors.hpp).
std::vector<double> random_tensor(const Shape& s, DType dtype, uint32_t stream);

std::unique_ptr<Context> g_ctx;
BackendOptions g_backend;  // g_ctx's
uint32_t g_seed = 0;       // rank 0's, broadcast: every rank builds the same global tensors
int g_dp = 1, g_fsdp = 1, g_tp = 1;

std::vector<double> random_tensor(const Shape& s, DType dtype, uint32_t stream) {
  return test::random_tensor(s, dtype, g_seed, stream);
}

SpecEntry none() { return SpecEntry::none(); }
SpecEntry fsdp() { return SpecEntry::axis("fsdp"); }

// Host bytes of `v` in `dtype`, copied into backend memory (and back).
struct Buffer {
  Backend& be;
  void* p = nullptr;
  size_t bytes = 0;
  Buffer(Backend& b, const std::vector<double>& v, DType dtype) : be(b) {
    std::vector<float> f(v.begin(), v.end());
    bytes = std::max<size_t>(1, v.size() * dtype_size(dtype));
    std::vector<char> host(bytes);
    convert_from_float(f.data(), host.data(), dtype, static_cast<int64_t>(f.size()));
    p = be.allocate(bytes);
    be.copy_from_host(p, host.data(), bytes);
  }
  ~Buffer() { be.release(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::vector<char> bytes_back() const {
    std::vector<char> host(bytes);
    be.copy_to_host(host.data(), p, bytes);
    return host;
  }
};

// Every element of `bytes` (of `dtype`) within tolerance x scale (+1e-6) of `want`: one
// failure per element off (the first 3 shown), NaN included.
void expect_near(const std::vector<char>& bytes, DType dtype, const std::vector<double>& want,
                 const std::vector<double>& scale, double tolerance, const std::string& what) {
  std::vector<float> got(want.size());
  convert_to_float(bytes.data(), dtype, got.data(), static_cast<int64_t>(got.size()));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tolerance * scale[i] + 1e-6) && bad++ < 3) {
      ADD_FAILURE() << what << ": out[" << i << "] = " << got[i] << ", reference " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off";
}

// The same GEMM with the whole weight passed in: the fsdp entry of the rhs spec dropped.
GemmDesc gathered(GemmDesc d) {
  for (SpecEntry& e : d.rhs_spec) {
    if (e.is_axis("fsdp")) e = none();
  }
  return d;
}

// Runs `desc` on both paths and the gathered plan; checks each against the fp64 reference.
// `made`: a plan of desc made earlier, run instead of a new one.
void run_and_check(const GemmDesc& desc, double tolerance, GemmPlan* made = nullptr) {
  SCOPED_TRACE(desc.name);
  Backend& be = g_ctx->backend();
  std::unique_ptr<GemmPlan> own;
  if (made == nullptr) own = std::make_unique<GemmPlan>(*g_ctx, desc);
  GemmPlan& plan = made != nullptr ? *made : *own;
  GemmPlan whole(*g_ctx, gathered(desc));
  const PlanDescription& d = plan.description();
  ASSERT_GE(d.fsdp_dim, 0) << "the plan gathers no rhs dim";
  EXPECT_EQ(d.rhs_gathered, whole.rhs_local());
  EXPECT_EQ(num_elements(plan.rhs_local()) * g_fsdp, num_elements(whole.rhs_local()));

  const DType in = desc.dtype, out_t = desc.out_dtype;
  const auto lhs = random_tensor(desc.lhs_shape, in, 1);
  const auto rhs = random_tensor(desc.rhs_shape, in, 2);
  std::vector<double> bias;
  if (desc.bias_shape) bias = random_tensor(*desc.bias_shape, out_t, 3);

  // lhs [.., K] @ rhs [K, N] or [N, K] (contracting_dims say which).
  const int64_t k = desc.lhs_shape.back();
  const int64_t m = num_elements(desc.lhs_shape) / k;
  const bool rhs_nk = desc.contracting_dims.second[0] != 0;
  const int64_t n = num_elements(desc.rhs_shape) / k;
  std::vector<double> ref(static_cast<size_t>(m * n)), mag(ref.size());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0, a = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = lhs[static_cast<size_t>(i * k + p)] *
                         rhs[static_cast<size_t>(rhs_nk ? j * k + p : p * n + j)];
        s += x;
        a += std::fabs(x);
      }
      if (!bias.empty()) s += bias[static_cast<size_t>(j)];
      ref[static_cast<size_t>(i * n + j)] = s;
      mag[static_cast<size_t>(i * n + j)] = a;
    }
  }
  const Buffer x(be, shard(lhs, desc.lhs_shape, plan.lhs_offset(), plan.lhs_local()), in);
  const Buffer w(be, shard(rhs, desc.rhs_shape, plan.rhs_offset(), plan.rhs_local()), in);
  const Buffer w_all(be, shard(rhs, desc.rhs_shape, whole.rhs_offset(), whole.rhs_local()), in);
  std::unique_ptr<Buffer> b;
  if (!bias.empty()) {
    b = std::make_unique<Buffer>(
        be, shard(bias, *desc.bias_shape, plan.bias_offset(), plan.bias_local()), out_t);
  }
  const auto want = shard(ref, plan.out_global(), plan.out_offset(), plan.out_local());
  const auto scale = shard(mag, plan.out_global(), plan.out_offset(), plan.out_local());
  const std::vector<double> nan(want.size(), std::nan(""));
  std::vector<std::vector<char>> outs;
  for (int path = 0; path < 3; ++path) {
    const Buffer out(be, nan, out_t);
    const void* bias_p = b ? b->p : nullptr;
    if (path == 0) plan.execute_overlapped(x.p, w.p, bias_p, out.p);
    if (path == 1) plan.execute_sequential(x.p, w.p, bias_p, out.p);
    if (path == 2) whole.execute(x.p, w_all.p, bias_p, out.p);
    outs.push_back(out.bytes_back());
    expect_near(outs.back(), out_t, want, scale, tolerance, "path " + std::to_string(path));
  }
  // The CPU backend computes every output element alike whatever a GEMM's shape; cuBLASLt may
  // choose another algorithm for another shape (another order of the fp32 sums), so there the
  // last bits may differ, within the reference bound checked above: between the tp kinds'
  // chunked GEMMs (overlapped) and their whole one (sequential) at tp > 1, as without FSDP, and
  // between a shard's N/f columns and the whole weight's N. At tp 1 both paths run the same
  // shard GEMMs.
  const bool cpu = be.kind() == BackendKind::kCpu;
  if (cpu || g_tp == 1) {
    EXPECT_EQ(outs[0], outs[1]) << "the overlapped and the sequential path differ";
  }
  if (cpu) {
    EXPECT_EQ(outs[0], outs[2]) << "the FSDP plan differs from the GEMM on the whole weight";
  }
}

GemmDesc standard(CollectiveOp op, DType dtype, bool bias, bool sequence_first = false,
                  int64_t widen = 1) {
  const PlanningMesh m = planning_mesh(*g_ctx);
  const int64_t batch = 2 * g_dp * g_fsdp, seq = 4 * g_tp, k = 16 * widen,
                n = 12 * g_fsdp * g_tp * widen;
  GemmDesc d = tensor_sequence_parallel_gemm(m, std::string(collective_name(op)), op, batch, seq, k,
                                             n, dtype, bias, sequence_first);
  return d;
}

// Whether gemm.py's rule gathers this layout's fsdp-sharded weight on this mesh: with a reduce
// axis (tp's, the reduce-scatter and the plain GEMM of a row-parallel layer) it gathers a
// non-contracting rhs dim only where the lhs's non-contracting dims name the same entry, i.e.
// the batch sharded over fsdp alone (no dp replicas).
bool planner_gathers(CollectiveOp op) { return op == CollectiveOp::kAllGather || g_dp == 1; }

TEST(FsdpGemm, StandardLayoutsMatchTheReferenceAndTheWholeWeight) {
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kNone}) {
    for (bool bias : {false, true}) {
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        const GemmDesc d = standard(op, dtype, bias);
        if (!planner_gathers(op)) {
          const std::string why = error_of([&] { GemmPlan p(*g_ctx, d); });
          EXPECT_NE(why.find("keeps the rhs"), std::string::npos) << why;
          EXPECT_NE(why.find("shard the lhs batch over 'fsdp' alone"), std::string::npos) << why;
          continue;
        }
        run_and_check(d, dtype == DType::kFloat32 ? 1e-5 : 1e-2);
      }
    }
  }
}

TEST(FsdpGemm, SequenceFirstActivations) {
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    if (planner_gathers(op)) run_and_check(standard(op, DType::kFloat32, true, true), 1e-5);
  }
}

// A plain GEMM (tp replicated) of an [N, K] weight sharded over fsdp on N: each shard is whole
// rows of the stored weight.
// The plans of one context share one fsdp ring (program/shared_ring.hpp): it is the largest
// plan's gathered weight, not the sum; a plan made before it grew still runs right after; once a
// call was captured with it, it refuses to grow; the last plan gone, it is released. On a
// context of its own (the capture marks it).
TEST(FsdpGemm, PlansShareOneGatheredWeight) {
  std::unique_ptr<Context> saved = std::move(g_ctx);
  g_ctx = std::make_unique<Context>(MPI_COMM_WORLD, MeshConfig{.dp = g_dp, .tp = 0, .fsdp = g_fsdp},
                                    g_backend, OverlapOptions{});
  {
    const GemmDesc small = standard(CollectiveOp::kAllGather, DType::kFloat32, true);
    const GemmDesc big = standard(CollectiveOp::kAllGather, DType::kFloat32, true, false, 2);
    GemmPlan a(*g_ctx, small);
    const int64_t need_a = a.description().bytes.fsdp_ring;
    EXPECT_GT(need_a, 0);
    EXPECT_EQ(g_ctx->fsdp_ring_bytes(), need_a);
    GemmPlan b(*g_ctx, big);
    const int64_t need_b = b.description().bytes.fsdp_ring;
    EXPECT_GT(need_b, need_a);
    EXPECT_EQ(g_ctx->fsdp_ring_bytes(), need_b) << "one ring at the largest need, not the sum";
    run_and_check(small, 1e-5, &a);  // made before the ring grew
    run_and_check(big, 1e-5, &b);
    run_and_check(small, 1e-5, &a);
    EXPECT_EQ(g_ctx->fsdp_ring_bytes(), need_b);
    // A call captured with the ring: growing it now would leave the graph a freed buffer.
    Backend& be = g_ctx->backend();
    const auto filled = [&](const Shape& s) {
      return std::make_unique<Buffer>(
          be, std::vector<double>(static_cast<size_t>(num_elements(s)), 0.5), DType::kFloat32);
    };
    const auto x = filled(b.lhs_local()), w = filled(b.rhs_local()), bias = filled(b.bias_local()),
               out = filled(b.out_local());
    const CapturedCall call = b.capture(Operands(x->p, w->p, bias->p, out->p), nullptr);
    const GemmDesc bigger = standard(CollectiveOp::kAllGather, DType::kFloat32, true, false, 3);
    const std::string why = error_of([&] { GemmPlan p(*g_ctx, bigger); });
    EXPECT_NE(why.find("make the plan with the largest weight before capturing"), std::string::npos)
        << why;
    EXPECT_EQ(g_ctx->fsdp_ring_bytes(), need_b);
    GemmPlan c(*g_ctx, small);  // one that fits is still made
  }
  // Released with the last plan that used it (and its captures with them): it may grow again.
  EXPECT_EQ(g_ctx->fsdp_ring_bytes(), 0);
  {
    GemmPlan d(*g_ctx, standard(CollectiveOp::kAllGather, DType::kFloat32, true, false, 3));
    EXPECT_EQ(g_ctx->fsdp_ring_bytes(), d.description().bytes.fsdp_ring);
  }
  g_ctx = std::move(saved);
}

TEST(FsdpGemm, TransposedWeight) {
  GemmDesc d;
  d.name = "nk";
  d.lhs_shape = {8, 16};
  d.rhs_shape = {6 * g_fsdp, 16};
  d.lhs_spec = {none(), none()};
  d.rhs_spec = {fsdp(), none()};
  d.contracting_dims = {{1}, {1}};
  d.dtype = d.out_dtype = DType::kFloat32;
  d.bias_shape = Shape{6 * g_fsdp};
  d.bias_spec = {none()};
  run_and_check(d, 1e-5);
}

// FSDP's weight gradient (GemmDesc::fsdp_scatter_dim, kinds/fsdp_reduce_scatter_gemm.cpp):
// dW = x^T dy over the tokens, which every data-parallel rank splits; the sum over the fsdp group
// reduce-scattered so each rank gets its weight shard's block (and, with replicas, summed over
// dp too). Against fp64; both paths byte-identical (both sum the blocks in rank order in fp32);
// a second call byte-identical to the first.
void run_wgrad(GemmDesc d, double tolerance) {
  SCOPED_TRACE(d.name);
  Backend& be = g_ctx->backend();
  GemmPlan plan(*g_ctx, d);
  const PlanDescription& pd = plan.description();
  ASSERT_EQ(pd.out_spec[static_cast<size_t>(d.fsdp_scatter_dim)], fsdp());
  const auto x = random_tensor(d.lhs_shape, d.dtype, 4),
             dy = random_tensor(d.rhs_shape, d.dtype, 5);
  std::vector<double> bias;
  if (d.bias_shape) bias = random_tensor(*d.bias_shape, d.out_dtype, 6);
  const int64_t tokens = d.lhs_shape[0] * d.lhs_shape[1], k = d.lhs_shape[2], n = d.rhs_shape[2];
  std::vector<double> ref(static_cast<size_t>(k * n)), mag(ref.size());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double v = x[static_cast<size_t>(t * k + i)] * dy[static_cast<size_t>(t * n + j)];
        ref[static_cast<size_t>(i * n + j)] += v;
        mag[static_cast<size_t>(i * n + j)] += std::fabs(v);
      }
    }
  }
  if (!bias.empty()) {
    for (int64_t i = 0; i < k * n; ++i)
      ref[static_cast<size_t>(i)] += bias[static_cast<size_t>(i % n)];
  }
  const Buffer xb(be, shard(x, d.lhs_shape, plan.lhs_offset(), plan.lhs_local()), d.dtype);
  const Buffer dyb(be, shard(dy, d.rhs_shape, plan.rhs_offset(), plan.rhs_local()), d.dtype);
  std::unique_ptr<Buffer> bb;
  if (!bias.empty()) {
    bb = std::make_unique<Buffer>(
        be, shard(bias, *d.bias_shape, plan.bias_offset(), plan.bias_local()), d.out_dtype);
  }
  const auto want = shard(ref, plan.out_global(), plan.out_offset(), plan.out_local());
  const auto scale = shard(mag, plan.out_global(), plan.out_offset(), plan.out_local());
  const std::vector<double> nan(want.size(), std::nan(""));
  std::vector<std::vector<char>> outs;
  for (int path = 0; path < 3; ++path) {
    const Buffer out(be, nan, d.out_dtype);
    const void* b = bb ? bb->p : nullptr;
    if (path == 1) {
      plan.execute_sequential(xb.p, dyb.p, b, out.p);
    } else {
      plan.execute_overlapped(xb.p, dyb.p, b, out.p);
    }
    outs.push_back(out.bytes_back());
    expect_near(outs.back(), d.out_dtype, want, scale, tolerance, "path " + std::to_string(path));
  }
  EXPECT_EQ(outs[0], outs[1]) << "the overlapped and the sequential path differ";
  EXPECT_EQ(outs[0], outs[2]) << "a second call differs from the first";
}

GemmDesc wgrad(std::string name, bool by_rows, DType dtype, DType out_dtype, bool bias) {
  const SpecEntry data = g_dp == 1 ? fsdp() : SpecEntry::tuple({"dp", "fsdp"});
  const SpecEntry tpsp = SpecEntry::axis("tpsp");
  const int64_t b = 2 * g_dp * g_fsdp, s = 6, k = 8 * g_fsdp * g_tp, n = 4 * g_fsdp * g_tp;
  GemmDesc d;
  d.name = std::move(name);
  d.lhs_shape = {b, s, k};
  d.rhs_shape = {b, s, n};
  d.contracting_dims = {{0, 1}, {0, 1}};
  d.dtype = dtype;
  d.out_dtype = out_dtype;
  // By rows: the column-parallel weight's gradient [K, N] (None, tpsp) -> (fsdp, tpsp); by
  // columns: the row-parallel one's [F, H] (tpsp, None) -> (tpsp, fsdp).
  d.lhs_spec = {data, none(), by_rows ? none() : tpsp};
  d.rhs_spec = {data, none(), by_rows ? tpsp : none()};
  d.fsdp_scatter_dim = by_rows ? 0 : 1;
  if (bias) {
    d.bias_shape = Shape{n};
    d.bias_spec = {by_rows ? tpsp : none()};
  }
  return d;
}

TEST(FsdpGemm, WeightGradientReduceScatter) {
  for (bool by_rows : {true, false}) {
    const std::string how = by_rows ? "rows" : "columns";
    run_wgrad(wgrad("dW by " + how, by_rows, DType::kFloat32, DType::kFloat32, false), 1e-5);
    run_wgrad(wgrad("dW by " + how + " bf16 -> fp32, bias", by_rows, DType::kBFloat16,
                    DType::kFloat32, true),
              1e-5);
    run_wgrad(wgrad("dW by " + how + " bf16", by_rows, DType::kBFloat16, DType::kBFloat16, false),
              2e-2);
  }
}

TEST(FsdpGemm, WeightGradientRefusals) {
  // The planner reduces nothing over fsdp: the tokens are not split over it.
  GemmDesc d = wgrad("replicated tokens", true, DType::kFloat32, DType::kFloat32, false);
  d.lhs_spec[0] = d.rhs_spec[0] = none();
  std::string why = error_of([&] { GemmPlan p(*g_ctx, d); });
  EXPECT_NE(why.find("does not reduce the output"), std::string::npos) << why;
  // A dim that is not whole blocks of the local output.
  d = wgrad("bad dim", true, DType::kFloat32, DType::kFloat32, false);
  d.fsdp_scatter_dim = 2;
  why = error_of([&] { GemmPlan p(*g_ctx, d); });
  EXPECT_NE(why.find("by its first dim (rows) or by dim 1"), std::string::npos) << why;
  // Rows that do not divide.
  d = wgrad("odd rows", true, DType::kFloat32, DType::kFloat32, false);
  d.lhs_shape[2] = 8 * g_fsdp * g_tp + 1;
  why = error_of([&] { GemmPlan p(*g_ctx, d); });
  EXPECT_NE(why.find("does not divide into fsdp=" + std::to_string(g_fsdp) + " blocks"),
            std::string::npos)
      << why;
  // Only a plain GEMM.
  GemmDesc ag = standard(CollectiveOp::kAllGather, DType::kFloat32, false);
  ag.rhs_spec = gathered(ag).rhs_spec;
  ag.fsdp_scatter_dim = 0;
  why = error_of([&] { GemmPlan p(*g_ctx, ag); });
  EXPECT_NE(why.find("only a plain GEMM"), std::string::npos) << why;
}

TEST(FsdpGemm, RefusesWhatItDoesNotRun) {
  // A weight dim that does not divide: cgemm does not pad shards.
  GemmDesc d;
  d.name = "odd";
  d.lhs_shape = {8, 16};
  d.rhs_shape = {16, 6 * g_fsdp + 1};
  d.lhs_spec = {none(), none()};
  d.rhs_spec = {none(), fsdp()};
  d.dtype = d.out_dtype = DType::kFloat32;
  std::string why = error_of([&] { GemmPlan p(*g_ctx, d); });
  EXPECT_NE(why.find("does not divide into fsdp=" + std::to_string(g_fsdp)), std::string::npos)
      << why;
  EXPECT_NE(why.find("pad the weight"), std::string::npos) << why;
  // The contracting dim of an [N, K] weight: its shards are column blocks.
  d.name = "nk contracting";
  d.rhs_shape = {12, 16};
  d.rhs_spec = {none(), fsdp()};
  d.contracting_dims = {{1}, {1}};
  why = error_of([&] { GemmPlan p(*g_ctx, d); });
  EXPECT_NE(why.find("outermost dim of an rhs stored [K..., N...]"), std::string::npos) << why;
  // An inner non-contracting dim of an N-D weight.
  d.name = "inner";
  d.rhs_shape = {16, 2, 4 * g_fsdp};
  d.rhs_spec = {none(), none(), fsdp()};
  d.contracting_dims = {{1}, {0}};
  why = error_of([&] { GemmPlan p(*g_ctx, d); });
  EXPECT_NE(why.find("outermost of the rhs's non-contracting dims"), std::string::npos) << why;
  // FP8: the shards would have to move quantized.
  GemmDesc q = standard(CollectiveOp::kAllGather, DType::kBFloat16, false);
  q.quantization.mode = ScalingMode::kCurrentTensorScaling;
  why = error_of([&] { GemmPlan p(*g_ctx, q); });
  EXPECT_NE(why.find("not run yet"), std::string::npos) << why;
}

// GradientBuckets sums over dp alone: it refuses an fsdp axis instead of giving a wrong
// gradient. (The layer pair runs on fsdp: cgemm-train's fsdp parity, check_train.sh.)
TEST(FsdpGemm, GradientBucketsRefuseAnFsdpAxis) {
  const std::string why = error_of([] { GradientBuckets b(g_ctx->backend(), {{"w", 16}}, 1024); });
  EXPECT_NE(
      why.find("GradientBuckets: the mesh has an fsdp axis (" + std::to_string(g_fsdp) + " ranks)"),
      std::string::npos)
      << why;
}

TEST(FsdpGemm, MeshThatDoesNotFactorTheWorldIsRefused) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const std::string why = error_of([&] {
    Context c(MPI_COMM_WORLD, MeshConfig{.dp = 1, .tp = 0, .fsdp = world + 1}, BackendKind::kCpu,
              OverlapOptions{});
  });
  EXPECT_NE(why.find("does not divide the world size " + std::to_string(world)), std::string::npos)
      << why;
  const std::string names = error_of([&] {
    Context c(MPI_COMM_WORLD, MeshConfig{.dp = 1, .tp = 0, .fsdp = world, .fsdp_axis = "dp"},
              BackendKind::kCpu, OverlapOptions{});
  });
  EXPECT_NE(names.find("three different, non-empty names"), std::string::npos) << names;
  // Without an fsdp axis its name is unused: a dp axis called "fsdp" stays a valid mesh.
  Context plain(MPI_COMM_WORLD, MeshConfig{.dp = 1, .tp = 0, .dp_axis = "fsdp"}, BackendKind::kCpu,
                OverlapOptions{});
  EXPECT_EQ(plain.comms().fsdp(), 1);
  EXPECT_FALSE(plain.mesh_resource().fsdp_resource.has_value());
}

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--dp") == 0) cgemm::g_dp = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--fsdp") == 0) cgemm::g_fsdp = std::atoi(argv[i + 1]);
  }
  cgemm::g_tp = world / (cgemm::g_dp * cgemm::g_fsdp);
  cgemm::g_seed = std::random_device{}();
  MPI_Bcast(&cgemm::g_seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  const std::optional<cgemm::BackendOptions> backend = cgemm::test::backend_from_env();
  if (!backend) {
    if (rank == 0) std::printf("CGEMM_TEST_BACKEND=cuda, but some rank has no GPU: skipped\n");
    MPI_Finalize();
    return 0;
  }
  if (rank == 0) {
    std::printf("seed %u, dp %d x fsdp %d x tp %d, backend %s\n", cgemm::g_seed, cgemm::g_dp,
                cgemm::g_fsdp, cgemm::g_tp, cgemm::test::backend_word(*backend));
  }
  cgemm::g_backend = *backend;
  cgemm::g_ctx = std::make_unique<cgemm::Context>(
      MPI_COMM_WORLD, cgemm::MeshConfig{.dp = cgemm::g_dp, .tp = 0, .fsdp = cgemm::g_fsdp},
      cgemm::g_backend, cgemm::OverlapOptions{});
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
