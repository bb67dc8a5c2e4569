// CUDA graphs (GemmPlan::capture, captured_call.hpp) under mpirun, on the backend named by
// CGEMM_TEST_BACKEND (cpu, the default, in CI; cuda on the GPU machine, ranks sharing the GPU):
//  - every collective kind (all-gather, reduce-scatter, none) on both paths (overlapped and
//    sequential), with aggregate_all_gather on and off, unquantized and FP8 (current and
//    delayed scaling): a captured call replayed 101 times, then an eager call, then 3 replays,
//    an eager call and 1 replay, each output (poisoned first) byte-identical to the eager
//    call's on the same inputs;
//  - two plans' graphs replayed in turns (their exchanges share the transport's flags);
//  - what cannot be captured is refused before anything is recorded, with one message naming
//    it: a grouped GEMM (its sizes go to the host), a trace being taken, a missing operand.
// The CPU backend emulates graphs (a replay runs the call again), so in CI this tests the
// API, the refusals and the sequence; on the CUDA backend it tests the graphs themselves (the
// copy-engine flags that must return to 0, the scale state in device memory).

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../support/error_of.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "cgemm/runtime/plan.hpp"

namespace cgemm {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

BackendKind backend_kind() {
  const char* b = std::getenv("CGEMM_TEST_BACKEND");
  return b != nullptr && std::string(b) == "cuda" ? BackendKind::kCuda : BackendKind::kCpu;
}

// CGEMM_TEST_BACKEND=cuda without a GPU on every rank: each test skips (the same answer on
// every rank).
class Capture : public ::testing::Test {
 protected:
  void SetUp() override {
    int ok = backend_kind() == BackendKind::kCpu || cuda_backend_available() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (ok == 0) GTEST_SKIP() << "no GPU on some rank";
  }
};

Context make_context(const OverlapOptions& o) {
  BackendOptions b;
  b.kind = backend_kind();
  b.gpu_sharing = b.kind == BackendKind::kCuda;  // the GPU test runs every rank on one GPU
  return Context(MPI_COMM_WORLD, MeshConfig{}, b, o);
}

// Values in +-[0.25, 1] (never zero), different on every rank and for every `id`.
std::vector<float> random_values(int64_t count, uint32_t id) {
  std::mt19937 gen(977u + 7919u * id + 104729u * static_cast<uint32_t>(world_rank()));
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = sign(gen) ? mag(gen) : -mag(gen);
  return v;
}

// A buffer of the backend (device memory on CUDA), freed with the test.
struct Buffer {
  Backend& be;
  size_t bytes;
  void* p;
  Buffer(Backend& b, size_t n) : be(b), bytes(n), p(b.allocate(std::max<size_t>(n, 1))) {}
  ~Buffer() { be.release(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::vector<uint8_t> bytes_now() const {
    be.synchronize();
    std::vector<uint8_t> h(bytes);
    be.copy_to_host(h.data(), p, bytes);
    return h;
  }
  void poison() {
    const std::vector<uint8_t> nan(bytes, 0xff);  // NaN in fp32 and bf16
    be.synchronize();
    be.copy_from_host(p, nan.data(), bytes);
  }
};

// One plan's operands, random, in the backend's memory.
struct Call {
  Buffer lhs, rhs, bias, out;
  Call(Backend& be, const GemmPlan& plan, uint32_t seed)
      : lhs(be, bytes(plan.lhs_local(), plan.desc().dtype)),
        rhs(be, bytes(plan.rhs_local(), plan.desc().dtype)),
        bias(be, bytes(plan.bias_local(), plan.desc().out_dtype)),
        out(be, bytes(plan.out_local(), plan.desc().out_dtype)) {
    fill(be, lhs, plan.lhs_local(), plan.desc().dtype, seed);
    fill(be, rhs, plan.rhs_local(), plan.desc().dtype, seed + 1);
    fill(be, bias, plan.bias_local(), plan.desc().out_dtype, seed + 2);
  }
  Operands operands() const { return Operands(lhs.p, rhs.p, bias.p, out.p); }
  static size_t bytes(const Shape& s, DType t) {
    return static_cast<size_t>(num_elements(s)) * dtype_size(t);
  }
  static void fill(Backend& be, Buffer& b, const Shape& s, DType t, uint32_t seed) {
    const std::vector<float> v = random_values(num_elements(s), seed);
    std::vector<uint8_t> raw(b.bytes);
    convert_from_float(v.data(), raw.data(), t, static_cast<int64_t>(v.size()));
    be.copy_from_host(b.p, raw.data(), raw.size());
  }
};

GemmDesc desc_for(const Context& ctx, CollectiveOp op, ScalingMode scaling, const char* name) {
  const int tp = ctx.comms().tp();
  GemmDesc d = tensor_sequence_parallel_gemm(ctx, name, op, 2, 8 * tp, 16 * tp, 8 * tp,
                                             DType::kBFloat16, true, false);
  d.quantization.mode = scaling;
  return d;
}

std::string what(const GemmPlan& plan, const char* step, int i) {
  return plan.desc().name + " (" + plan.path_summary() + "), " + step + " " + std::to_string(i) +
         ", rank " + std::to_string(world_rank());
}

// Eager twice (delayed scaling's history settles on the first call: same inputs, same scale
// from then on), then the replay sequence against the second eager output.
void check_replays(Backend& be, GemmPlan& plan, uint32_t seed) {
  Call c(be, plan, seed);
  void* stream = be.native_stream();
  plan.execute(c.operands(), stream);
  c.out.poison();
  plan.execute(c.operands(), stream);
  const std::vector<uint8_t> eager = c.out.bytes_now();
  const std::vector<uint8_t> nan(eager.size(), 0xff);
  ASSERT_NE(eager, nan) << what(plan, "eager call", 2) << ": the output was not written";

  c.out.poison();
  CapturedCall graph = plan.capture(c.operands(), stream);
  // Capturing runs nothing: the output is still poisoned.
  EXPECT_EQ(c.out.bytes_now(), nan) << what(plan, "capture", 0) << ": the capture ran work";
  const int sequence[] = {101, -1, 3, -1, 1};  // replays, or -1: one eager call
  for (int s : sequence) {
    c.out.poison();
    if (s < 0) {
      plan.execute(c.operands(), stream);
    } else {
      for (int i = 0; i < s; ++i) graph.replay(stream);
    }
    EXPECT_EQ(c.out.bytes_now(), eager)
        << what(plan, s < 0 ? "eager call after replays" : "replays", s);
  }
}

constexpr ScalingMode kScalings[] = {ScalingMode::kNoScaling, ScalingMode::kCurrentTensorScaling,
                                     ScalingMode::kDelayedTensorScaling};
constexpr CollectiveOp kOps[] = {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                                 CollectiveOp::kNone};

TEST_F(Capture, ReplaysAreEagerBitForBit) {
  uint32_t seed = 10;
  for (bool aggregate : {false, true}) {
    for (OverlapPolicy policy : {OverlapPolicy::kAlways, OverlapPolicy::kNever}) {
      OverlapOptions o;
      o.aggregate_all_gather = aggregate;
      o.policy = policy;
      Context ctx = make_context(o);
      for (CollectiveOp op : kOps) {
        for (ScalingMode scaling : kScalings) {
          GemmPlan plan(ctx, desc_for(ctx, op, scaling, "capture"));
          SCOPED_TRACE(std::string(collective_name(op)) + ", scaling " +
                       std::to_string(static_cast<int>(scaling)) + ", aggregate " +
                       std::to_string(aggregate));
          check_replays(ctx.backend(), plan, seed += 10);
        }
      }
    }
  }
}

// A null stream: the capture is from the backend's stream 0 and replays go there (and are
// ordered with the eager calls there), as a call without a stream.
TEST_F(Capture, NullStreamIsStreamZero) {
  Context ctx = make_context(OverlapOptions{.policy = OverlapPolicy::kAlways});
  Backend& be = ctx.backend();
  GemmPlan plan(ctx, desc_for(ctx, CollectiveOp::kReduceScatter, ScalingMode::kNoScaling, "null"));
  Call c(be, plan, 800);
  plan.execute(c.operands());
  const std::vector<uint8_t> eager = c.out.bytes_now();
  CapturedCall graph = plan.capture(c.operands(), nullptr);
  for (int i = 0; i < 5; ++i) {
    c.out.poison();
    graph.replay();
    plan.execute(c.operands());  // right behind the replay, on the same stream
    graph.replay();
    EXPECT_EQ(c.out.bytes_now(), eager) << "rank " << world_rank() << ", round " << i;
  }
}

TEST_F(Capture, TwoPlansReplayedInTurns) {
  Context ctx = make_context(OverlapOptions{.policy = OverlapPolicy::kAlways});
  Backend& be = ctx.backend();
  GemmPlan ag(ctx, desc_for(ctx, CollectiveOp::kAllGather, ScalingMode::kNoScaling, "turns_ag"));
  GemmPlan rs(ctx,
              desc_for(ctx, CollectiveOp::kReduceScatter, ScalingMode::kNoScaling, "turns_rs"));
  Call a(be, ag, 500), r(be, rs, 600);
  void* stream = be.native_stream();
  ag.execute(a.operands(), stream);
  rs.execute(r.operands(), stream);
  const std::vector<uint8_t> ag_eager = a.out.bytes_now(), rs_eager = r.out.bytes_now();
  CapturedCall ga = ag.capture(a.operands(), stream), gr = rs.capture(r.operands(), stream);
  a.out.poison();
  r.out.poison();
  for (int i = 0; i < 7; ++i) {
    ga.replay(stream);
    gr.replay(stream);
    if (i % 3 == 0) rs.execute(r.operands(), stream);  // eager calls mixed in
  }
  EXPECT_EQ(a.out.bytes_now(), ag_eager) << "rank " << world_rank();
  EXPECT_EQ(r.out.bytes_now(), rs_eager) << "rank " << world_rank();
}

using test::error_of;

TEST_F(Capture, RefusedBeforeAnythingIsRecorded) {
  Context ctx = make_context(OverlapOptions{});
  Backend& be = ctx.backend();
  GemmPlan plan(ctx, desc_for(ctx, CollectiveOp::kAllGather, ScalingMode::kNoScaling, "refused"));
  Call c(be, plan, 700);
  void* stream = be.native_stream();

  // A trace being taken.
  be.set_tracing(true);
  std::string msg = error_of([&] { plan.capture(c.operands(), stream); });
  be.set_tracing(false);
  static_cast<void>(be.take_trace());
  EXPECT_NE(msg.find("GEMM 'refused' cannot be captured into a CUDA graph: "), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("a trace is being taken"), std::string::npos) << msg;

  // A missing operand: execute's own message.
  msg = error_of([&] { plan.capture(Operands(c.lhs.p, c.rhs.p, nullptr, c.out.p), stream); });
  EXPECT_NE(msg.find("planned with a bias but got none"), std::string::npos) << msg;

  // A grouped GEMM: its sizes are copied to the host mid-call.
  GroupedGemmDesc gd;
  gd.name = "experts";
  gd.num_groups = 3;
  gd.lhs_shape = {12, 8};
  gd.rhs_shape = {3, 4, 8};  // [G, N, K]: the default contracting dims ((1,), (2,))
  gd.dtype = DType::kBFloat16;
  GroupedGemmPlan grouped(be, gd);
  Buffer lhs(be, 12 * 8 * 2), rhs(be, 3 * 8 * 4 * 2), out(be, 12 * 4 * 2), sizes(be, 3 * 4);
  const int32_t host_sizes[] = {4, 5, 3};
  be.copy_from_host(sizes.p, host_sizes, sizeof(host_sizes));
  Operands gx(lhs.p, rhs.p, nullptr, out.p);
  gx.set_input(Operand::kGroupSizes, sizes.p);
  msg = error_of([&] { grouped.capture(gx, stream); });
  EXPECT_NE(msg.find("grouped GEMM 'experts' cannot be captured into a CUDA graph: group sizes "
                     "to host 'experts group sizes' cannot be captured: the grouped GEMM's group "
                     "sizes are copied to the host"),
            std::string::npos)
      << msg;
  // Sizes given in host memory: the grouped GEMM op itself needs them on the host.
  Operands hx(lhs.p, rhs.p, nullptr, out.p);
  hx.set_input(Operand::kHostGroupSizes, host_sizes);
  msg = error_of([&] { grouped.capture(hx, stream); });
  EXPECT_NE(msg.find("grouped gemm 'experts' cannot be captured"), std::string::npos) << msg;

  // The plan still runs after the refusals, on every rank alike.
  c.out.poison();
  plan.execute(c.operands(), stream);
  const std::vector<uint8_t> got = c.out.bytes_now();
  EXPECT_NE(got, std::vector<uint8_t>(got.size(), 0xff));
}

}  // namespace
}  // namespace cgemm
