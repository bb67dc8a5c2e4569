// CUDA graphs (GemmPlan::capture, captured_call.hpp) under mpirun, on the backend named by
// CGEMM_TEST_BACKEND (cpu, the default, in CI; cuda on the GPU machine, ranks sharing the GPU):
//  - every collective kind (all-gather, reduce-scatter, none) on both paths (overlapped and
//    sequential), with aggregate_all_gather on and off, unquantized and FP8 (current and
//    delayed scaling): a captured call replayed 101 times, then an eager call, then 3 replays,
//    an eager call and 1 replay, each output (poisoned first) byte-identical to the eager
//    call's on the same inputs;
//  - two plans' graphs replayed in turns (their exchanges share the transport's flags);
//  - what cannot be captured is refused before anything is recorded, with one message naming
//    it: a grouped GEMM whose sizes go to the host, a trace being taken, a missing operand;
//  - a grouped GEMM of path cublaslt_device_tiles, its sizes in backend memory, captured once
//    and replayed with sizes that change between replays (empty groups, groups smaller and
//    larger than a tile, one group holding every row), each replay byte-identical to an eager
//    call on the same sizes and within bf16's rounding of an fp64 reference; bad sizes: NaN
//    out and the error at the next call (CUDA) or the error at once (CPU).
// The CPU backend emulates graphs (a replay runs the call again), so in CI this tests the
// API, the refusals and the sequence; on the CUDA backend it tests the graphs themselves (the
// copy-engine flags that must return to 0, the scale state in device memory).

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
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
  gd.rhs_shape = {3, 8, 8};  // [G, N, K]: the default contracting dims ((1,), (2,))
  gd.dtype = DType::kBFloat16;
  GroupedGemmPlan grouped(be, gd);
  Buffer lhs(be, 12 * 8 * 2), rhs(be, 3 * 8 * 8 * 2), out(be, 12 * 8 * 2), sizes(be, 3 * 4);
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
  // What would capture it, since the device tiles run this plan (N 8, K 8).
  EXPECT_NE(msg.find("this plan with path cublaslt_device_tiles, given its sizes in backend "
                     "memory, would read them there and could be captured"),
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

// The fp64 grouped GEMM of rows form: out[r] = lhs[r] @ rhs[g(r)] (+ bias[g(r)]); rhs [G, N, K]
// (rhs_trans) or [G, K, N].
std::vector<double> grouped_reference(const std::vector<float>& lhs, const std::vector<float>& rhs,
                                      const std::vector<float>* bias,
                                      const std::vector<int32_t>& sizes, int64_t k, int64_t n,
                                      bool rhs_trans) {
  const auto m = static_cast<int64_t>(lhs.size()) / k;
  std::vector<double> out(static_cast<size_t>(m * n));
  int64_t row = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const auto gi = static_cast<int64_t>(g);
    for (int64_t r = row; r < row + sizes[g]; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = bias != nullptr ? (*bias)[static_cast<size_t>(gi * n + j)] : 0.0;
        for (int64_t q = 0; q < k; ++q) {
          const int64_t w = rhs_trans ? (gi * n + j) * k + q : (gi * k + q) * n + j;
          acc += static_cast<double>(lhs[static_cast<size_t>(r * k + q)]) *
                 rhs[static_cast<size_t>(w)];
        }
        out[static_cast<size_t>(r * n + j)] = acc;
      }
    }
    row += sizes[g];
  }
  return out;
}

std::vector<float> to_floats(const std::vector<uint8_t>& raw, DType t) {
  std::vector<float> v(raw.size() / dtype_size(t));
  convert_to_float(raw.data(), t, v.data(), static_cast<int64_t>(v.size()));
  return v;
}

// A buffer filled with values of `t` rounded from random_values(count, seed); returns them.
std::vector<float> fill_random(Backend& be, Buffer& b, int64_t count, DType t, uint32_t seed) {
  std::vector<float> v = random_values(count, seed);
  std::vector<uint8_t> raw(b.bytes);
  convert_from_float(v.data(), raw.data(), t, count);
  be.copy_from_host(b.p, raw.data(), raw.size());
  return to_floats(raw, t);
}

TEST_F(Capture, GroupedDeviceSizesReplayWithChangingSizes) {
  Context ctx = make_context(OverlapOptions{});
  Backend& be = ctx.backend();
  void* stream = be.native_stream();
  constexpr int64_t kG = 5, kM = 300, kK = 64, kN = 48;
  // Each sums to M: equal groups, one group holding every row (first, last), groups across a
  // 128-row tile's edges, empty groups between.
  const std::vector<std::vector<int32_t>> size_sets = {{60, 60, 60, 60, 60}, {300, 0, 0, 0, 0},
                                                       {0, 0, 0, 0, 300},    {128, 1, 127, 0, 44},
                                                       {7, 256, 13, 23, 1},  {0, 129, 0, 171, 0}};
  struct Case {
    DType dtype;
    bool bias, rhs_trans;
  };
  for (const Case& cs : {Case{DType::kBFloat16, false, true}, Case{DType::kBFloat16, true, true},
                         Case{DType::kBFloat16, true, false}, Case{DType::kFloat32, false, true}}) {
    const std::string where = std::string(dtype_name(cs.dtype)) +
                              (cs.bias ? ", bias" : ", no bias") +
                              (cs.rhs_trans ? ", rhs [G, N, K]" : ", rhs [G, K, N]") + ", rank " +
                              std::to_string(world_rank());
    GroupedGemmDesc d;
    d.name = "device experts";
    d.num_groups = kG;
    d.lhs_shape = {kM, kK};
    d.rhs_shape = cs.rhs_trans ? Shape{kG, kN, kK} : Shape{kG, kK, kN};
    d.rhs_contracting_dims = {cs.rhs_trans ? 2 : 1};
    if (cs.bias) d.bias_shape = Shape{kG, kN};
    d.dtype = cs.dtype;
    d.path = GroupedPath::kCublasLtDeviceTiles;
    GroupedGemmPlan plan(be, d);
    EXPECT_TRUE(plan.shape().device_sizes) << where;
    EXPECT_EQ(plan.path(), be.kind() == BackendKind::kCuda ? GroupedPath::kCublasLtDeviceTiles
                                                           : GroupedPath::kLoop)
        << where;
    EXPECT_EQ(plan.capture_refusal(), "") << where;
    const size_t e = dtype_size(cs.dtype);
    Buffer lhs(be, kM * kK * e), rhs(be, kG * kK * kN * e), bias(be, kG * kN * e);
    Buffer out(be, kM * kN * e), eager_out(be, kM * kN * e), sizes(be, kG * sizeof(int32_t));
    const std::vector<float> lhs_v = fill_random(be, lhs, kM * kK, cs.dtype, 31);
    const std::vector<float> rhs_v = fill_random(be, rhs, kG * kK * kN, cs.dtype, 32);
    const std::vector<float> bias_v = fill_random(be, bias, kG * kN, cs.dtype, 33);
    const auto set_sizes = [&](const std::vector<int32_t>& v) {
      be.synchronize();  // no replay still reads the sizes
      be.copy_from_host(sizes.p, v.data(), v.size() * sizeof(int32_t));
    };
    const auto operands = [&](Buffer& o) {
      Operands x(lhs.p, rhs.p, cs.bias ? bias.p : nullptr, o.p);
      x.set_input(Operand::kGroupSizes, sizes.p);
      return x;
    };
    set_sizes(size_sets[0]);
    out.poison();
    CapturedCall graph = plan.capture(operands(out), stream);
    const std::vector<uint8_t> nan(out.bytes, 0xff);
    EXPECT_EQ(out.bytes_now(), nan) << where << ": the capture ran work";
    int turn = 0;
    for (const std::vector<int32_t>& v : size_sets) {
      set_sizes(v);
      eager_out.poison();
      plan.execute(operands(eager_out), stream);
      const std::vector<uint8_t> eager = eager_out.bytes_now();
      // Alternating counts: 1, 2, 3 replays...
      for (int r = 0; r <= turn % 3; ++r) {
        out.poison();
        graph.replay(stream);
        EXPECT_EQ(out.bytes_now(), eager) << where << ", sizes set " << turn << ", replay " << r;
      }
      const std::vector<double> ref =
          grouped_reference(lhs_v, rhs_v, cs.bias ? &bias_v : nullptr, v, kK, kN, cs.rhs_trans);
      const std::vector<float> got = to_floats(eager, cs.dtype);
      const double tol = cs.dtype == DType::kFloat32 ? 1e-3 : 2e-2;  // relative to |ref| + 1
      double worst = 0.0;
      for (size_t i = 0; i < ref.size(); ++i) {
        worst = std::max(worst, std::abs(got[i] - ref[i]) / (std::abs(ref[i]) + 1.0));
        if (std::isnan(got[i])) worst = 1e30;
      }
      EXPECT_LT(worst, tol) << where << ", sizes set " << turn;
      ++turn;
    }

    // Bad sizes. The CPU backend reads them before it runs: the error at once, out untouched.
    // The CUDA device tiles cannot: NaN in out, then the error at the next call, once.
    const std::vector<int32_t> negative = {100, 100, 100, 100, -100};
    const std::vector<int32_t> over_sum = {100, 100, 100, 100, 1};  // 401 rows of 300
    if (be.kind() == BackendKind::kCpu) {
      set_sizes(negative);
      std::string msg = error_of([&] { graph.replay(stream); });
      EXPECT_NE(msg.find("group 4 has a negative size -100"), std::string::npos) << msg;
      set_sizes(over_sum);
      msg = error_of([&] { plan.execute(operands(eager_out), stream); });
      EXPECT_NE(msg.find("the group sizes sum to 401, but the ragged dim M (lhs rows) = 300"),
                std::string::npos)
          << msg;
      EXPECT_EQ(error_of([&] { plan.check_device_sizes(); }), "") << where;
    } else {
      const std::string negative_says = "group 4 had a negative size -100";
      const std::string over_says =
          "the group sizes summed to 401, but the ragged dim M (lhs rows) = 300 (they may sum to "
          "less, the rest being padding, not to more)";
      const std::string one =
          "an earlier call's group sizes in device memory were bad (its out "
          "filled with NaN); ";
      const auto all_nan = [&](Buffer& b) {
        for (float f : to_floats(b.bytes_now(), cs.dtype)) {
          if (!std::isnan(f)) return false;
        }
        return true;
      };
      // Zeros (not the NaN of poison()) before a bad call, so that its NaN fill shows.
      const auto zero = [&](Buffer& b) {
        const std::vector<uint8_t> zeros(b.bytes, 0);
        be.synchronize();
        be.copy_from_host(b.p, zeros.data(), zeros.size());
      };
      // A replay, reported by the next replay once the device ran it (bytes_now waits).
      set_sizes(negative);
      zero(out);
      graph.replay(stream);
      EXPECT_TRUE(all_nan(out)) << where << ": bad sizes left a number in out";
      set_sizes(size_sets[1]);
      std::string msg = error_of([&] { graph.replay(stream); });
      EXPECT_NE(msg.find(one + negative_says), std::string::npos) << where << ": " << msg;
      EXPECT_EQ(error_of([&] { plan.check_device_sizes(); }), "") << where << ": reported twice";
      // An eager call, reported by check_device_sizes, which waits for it.
      set_sizes(over_sum);
      zero(eager_out);
      plan.execute(operands(eager_out), stream);
      msg = error_of([&] { plan.check_device_sizes(); });
      EXPECT_NE(msg.find(one + over_says), std::string::npos) << where << ": " << msg;
      EXPECT_TRUE(all_nan(eager_out)) << where << ": bad sizes left a number in out";
      // A replay reported by the next eager call, which then does not run (out stays zero).
      set_sizes(negative);
      graph.replay(stream);
      set_sizes(size_sets[1]);  // waits for the replay
      zero(eager_out);
      msg = error_of([&] { plan.execute(operands(eager_out), stream); });
      EXPECT_NE(msg.find(one + negative_says), std::string::npos) << where << ": " << msg;
      const std::vector<uint8_t> untouched = eager_out.bytes_now();
      EXPECT_EQ(untouched, std::vector<uint8_t>(untouched.size(), 0)) << where;
    }
    // Base pointers not on 16 bytes: refused before anything runs, on every backend.
    {
      Operands x = operands(out);
      x.set_input(Operand::kLhs, static_cast<char*>(lhs.p) + 2);
      const std::string msg = error_of([&] { plan.execute(x, stream); });
      EXPECT_NE(msg.find("lhs, rhs and out must start on 16 bytes"), std::string::npos) << msg;
    }
    // Good sizes run again after the error was reported.
    set_sizes(size_sets[3]);
    eager_out.poison();
    plan.execute(operands(eager_out), stream);
    const std::vector<uint8_t> eager = eager_out.bytes_now();
    out.poison();
    graph.replay(stream);
    EXPECT_EQ(out.bytes_now(), eager) << where << ", after the bad sizes";
    EXPECT_NE(eager, nan) << where;
  }
}

}  // namespace
}  // namespace cgemm
