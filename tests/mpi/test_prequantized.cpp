// Pre-quantized operands (QuantizationDesc::lhs_quantized / rhs_quantized) and QuantizedTensor
// (quantized_tensor.hpp, issue 42 items 1 and 2), under mpirun on the mesh given as --dp=D (tp =
// world / D), on the CPU backend or, with CGEMM_TEST_BACKEND=cuda, the CUDA backend (ranks sharing
// the GPU; every test skips where a rank has no GPU).
//
// For each collective (all-gather, reduce-scatter, none), both activation layouts, current and
// delayed scaling, and each choice of pre-quantized operands (lhs, rhs, both), on both paths:
//  - QuantizedTensor's FP8 copies equal the host's quantization of the global tensor's shard
//    byte for byte (one scale from the global amax), the colwise copy the rowwise one transposed;
//  - the GEMM fed those copies equals the GEMM that quantizes the same inputs itself (bit for
//    bit on the CPU backend; within fp32 rounding on CUDA, whose algorithm may differ per plan),
//    call after call (delayed scaling: both histories advance once per call), and the fp64
//    product of the dequantized operands;
//  - an all-gather GEMM with a pre-quantized lhs hands out the FP8 bytes its ring gathered.
// Layouts and modes it does not take are refused with one message.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../support/backend_buffer.hpp"
#include "../support/error_of.hpp"
#include "../support/global_tensors.hpp"
#include "../support/test_backend.hpp"
#include "cgemm/core/float8.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/plan.hpp"
#include "cgemm/runtime/quantized_tensor.hpp"

namespace cgemm {
namespace {

using test::BackendBuffer;
using test::error_of;
using test::shard;

std::unique_ptr<Context> g_ctx;
uint32_t g_seed = 0;  // rank 0's, broadcast: every rank builds the same global tensors
int g_dp = 1;

bool on_cpu() { return g_ctx->backend().kind() == BackendKind::kCpu; }

// The host's quantization of a global tensor as the kernels do it: one scale from its amax
// (current scaling; TE's fp8_max / amax), byte = saturate(x * scale).
struct HostQuantized {
  float scale = 1.0f, scale_inv = 1.0f;
  std::vector<uint8_t> bytes;
  std::vector<double> dequantized;  // byte x scale_inv
};

HostQuantized host_quantize(const std::vector<double>& x, DType format) {
  float amax = 0.0f;
  for (double v : x) amax = std::max(amax, std::fabs(static_cast<float>(v)));
  float state[ScaleStateLayout::kHistory] = {1.0f, 1.0f, 0.0f, 0.0f};
  numeric::update_current_scale(state, amax, numeric::fp8_max(format), 0);
  HostQuantized q;
  q.scale = state[ScaleStateLayout::kScale];
  q.scale_inv = state[ScaleStateLayout::kScaleInv];
  for (double v : x) {
    const uint8_t b = numeric::float_to_narrow(static_cast<float>(v) * q.scale, format);
    q.bytes.push_back(b);
    q.dequantized.push_back(static_cast<double>(numeric::narrow_to_float(b, format)) *
                            static_cast<double>(q.scale_inv));
  }
  return q;
}

// [R, C] row-major bytes as [C, R].
std::vector<uint8_t> transposed(const std::vector<uint8_t>& v, int64_t rows, int64_t cols) {
  std::vector<uint8_t> t(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      t[static_cast<size_t>(c * rows + r)] = v[static_cast<size_t>(r * cols + c)];
    }
  }
  return t;
}

// The standard tensor-sequence-parallel GEMM of `op` with a bias and an fp32 output, quantized
// by `mode` (e4m3 x e4m3): B = 2 dp, S = 4 tp, K = 32 tp, N = 16 tp, so every rank's k and n
// keep cuBLASLt's FP8 alignment.
GemmDesc base_desc(CollectiveOp op, bool tbs, ScalingMode mode) {
  const int tp = g_ctx->comms().tp();
  GemmDesc d = tensor_sequence_parallel_gemm(*g_ctx, std::string(collective_name(op)), op, 2 * g_dp,
                                             4 * tp, 32 * tp, 16 * tp, DType::kBFloat16, true, tbs);
  d.out_dtype = DType::kFloat32;
  d.quantization.mode = mode;
  d.quantization.recipe.amax_history_len = 4;
  return d;
}

// The same GEMM with its rhs passed as W's colwise copy: [N, K], contracting its last dim.
GemmDesc with_colwise_rhs(GemmDesc d) {
  std::swap(d.rhs_shape[0], d.rhs_shape[1]);
  std::swap(d.rhs_spec[0], d.rhs_spec[1]);
  d.contracting_dims.second = {1};
  return d;
}

struct Given {
  const char* name;
  bool lhs, rhs;
};

void call(GemmPlan& plan, bool overlapped, const Operands& x) {
  if (overlapped) {
    plan.execute_overlapped(x);
  } else {
    plan.execute_sequential(x);
  }
}

// out within fp32 rounding of `want` (bit for bit on the CPU backend).
void expect_same(const std::vector<double>& got, const std::vector<double>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double peak = 0.0;
  for (double w : want) peak = std::max(peak, std::fabs(w));
  const double tol = on_cpu() ? 0.0 : 1e-5 * peak;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol) && bad++ < 3) {
      ADD_FAILURE() << what << ": out[" << i << "] = " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

// out = x_dq W_dq + b in fp64, for this rank's output shard (global tensors, the plan's offsets).
std::vector<double> reference(const GemmPlan& plan, const GemmDesc& d, const std::vector<double>& x,
                              const std::vector<double>& w, const std::vector<double>& b,
                              std::vector<double>* magnitude) {
  const int64_t k = d.lhs_shape[2], n = d.rhs_shape[1];
  const int64_t rows = d.lhs_shape[0] * d.lhs_shape[1];
  std::vector<double> out(static_cast<size_t>(rows * n)), mag(out.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double s = b[static_cast<size_t>(j)], m = std::fabs(s);
      for (int64_t p = 0; p < k; ++p) {
        const double t = x[static_cast<size_t>(r * k + p)] * w[static_cast<size_t>(p * n + j)];
        s += t;
        m += std::fabs(t);
      }
      out[static_cast<size_t>(r * n + j)] = s;
      mag[static_cast<size_t>(r * n + j)] = m;
    }
  }
  const Shape og{d.lhs_shape[0], d.lhs_shape[1], n};  // [B, S, N] or [S, B, N], as the lhs
  *magnitude = shard(mag, og, plan.out_offset(), plan.out_local());
  return shard(out, og, plan.out_offset(), plan.out_local());
}

void run_case(CollectiveOp op, bool tbs, ScalingMode mode, const Given& given) {
  SCOPED_TRACE(std::string(collective_name(op)) + (tbs ? " seq-first " : " batch-first ") +
               std::string(scaling_mode_name(mode)) + ", pre-quantized " + given.name);
  Backend& be = g_ctx->backend();
  const GemmDesc d0 = base_desc(op, tbs, mode);
  GemmPlan quantizing(*g_ctx, d0);
  GemmDesc d1 = d0;
  d1.name += " pre-quantized";
  d1.quantization.lhs_quantized = given.lhs;
  d1.quantization.rhs_quantized = given.rhs;
  if (given.rhs) d1 = with_colwise_rhs(d1);
  GemmPlan plan(*g_ctx, d1);
  ASSERT_EQ(plan.lhs_local(), quantizing.lhs_local());
  ASSERT_EQ(plan.out_local(), quantizing.out_local());

  const Shape ws{d0.rhs_shape[0], d0.rhs_shape[1]};
  const auto x = test::random_tensor(d0.lhs_shape, DType::kBFloat16, g_seed, 1);
  const auto w = test::random_tensor(ws, DType::kBFloat16, g_seed, 2);
  const auto b = test::random_tensor({ws[1]}, DType::kFloat32, g_seed, 3);
  const Shape& xl = quantizing.lhs_local();
  const Shape& wl = quantizing.rhs_local();
  const BackendBuffer xb(be, shard(x, d0.lhs_shape, quantizing.lhs_offset(), xl), DType::kBFloat16);
  const BackendBuffer wb(be, shard(w, ws, quantizing.rhs_offset(), wl), DType::kBFloat16);
  const BackendBuffer bb(be, shard(b, {ws[1]}, quantizing.bias_offset(), quantizing.bias_local()),
                         DType::kFloat32);
  const int64_t rows = num_elements(xl) / xl.back();
  QuantizedTensor qx(*g_ctx, {.name = "x",
                              .shape = {rows, xl.back()},
                              .dtype = DType::kBFloat16,
                              .format = DType::kFloat8E4M3,
                              .mode = mode,
                              .recipe = d0.quantization.recipe,
                              .rowwise = true,
                              .colwise = false});
  QuantizedTensor qw(*g_ctx, {.name = "W",
                              .shape = wl,
                              .dtype = DType::kBFloat16,
                              .format = DType::kFloat8E4M3,
                              .mode = mode,
                              .recipe = d0.quantization.recipe});
  const size_t out_bytes = static_cast<size_t>(num_elements(plan.out_local())) * sizeof(float);
  BackendBuffer want(be, out_bytes), got(be, out_bytes);

  for (bool overlapped : {true, false}) {
    SCOPED_TRACE(overlapped ? "overlapped" : "sequential");
    for (int round = 0; round < 2; ++round) {  // delayed scaling: the history's second scale
      SCOPED_TRACE("round " + std::to_string(round));
      want.poison();
      got.poison();
      call(quantizing, overlapped, Operands(xb.get(), wb.get(), bb.get(), want.get()));
      // One quantize() per call of the plan that quantizes itself: both histories advance alike.
      qx.quantize(xb.get());
      qw.quantize(wb.get());
      Operands in(given.lhs ? qx.rowwise() : xb.get(), given.rhs ? qw.colwise() : wb.get(),
                  bb.get(), got.get());
      if (given.lhs) in.set_input(Operand::kLhsScaleInv, qx.scale_inv());
      if (given.rhs) in.set_input(Operand::kRhsScaleInv, qw.scale_inv());
      call(plan, overlapped, in);
      expect_same(got.values_back(DType::kFloat32), want.values_back(DType::kFloat32),
                  "against the GEMM that quantizes itself");
    }
  }
  if (mode != ScalingMode::kCurrentTensorScaling) return;

  // Current scaling: the copies and the output against the host's quantization.
  const HostQuantized hx = host_quantize(x, DType::kFloat8E4M3);
  const HostQuantized hw = host_quantize(w, DType::kFloat8E4M3);
  const auto wq = shard(hw.bytes, ws, quantizing.rhs_offset(), wl);
  EXPECT_EQ(BackendBuffer::bytes_at(be, qw.rowwise(), wq.size()), wq) << "W rowwise";
  EXPECT_EQ(BackendBuffer::bytes_at(be, qw.colwise(), wq.size()), transposed(wq, wl[0], wl[1]))
      << "W colwise";
  const auto xq = shard(hx.bytes, d0.lhs_shape, quantizing.lhs_offset(), xl);
  EXPECT_EQ(BackendBuffer::bytes_at(be, qx.rowwise(), xq.size()), xq) << "x rowwise";
  float sx = 0.0f, sw = 0.0f;
  be.copy_to_host(&sx, qx.scale_inv(), sizeof(float));
  be.copy_to_host(&sw, qw.scale_inv(), sizeof(float));
  EXPECT_EQ(sx, hx.scale_inv);
  EXPECT_EQ(sw, hw.scale_inv);

  std::vector<double> mag;
  const auto ref = reference(plan, d0, hx.dequantized, hw.dequantized, b, &mag);
  const auto out = got.values_back(DType::kFloat32);
  int bad = 0;
  // The CPU backend sums the exact FP8 products in fp32: a few fp32 ulps of the magnitudes' sum.
  // cuBLASLt's FP8 GEMM on Hopper accumulates with fast accumulation (fewer bits before each
  // promotion to fp32; NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION=1 turns it off): 3e-4 of the
  // magnitudes seen on the H100 (2026-12-06), bounded at 2e-3.
  const double rel = on_cpu() ? 1e-5 : 2e-3;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!(std::fabs(out[i] - ref[i]) <= rel * mag[i]) && bad++ < 3) {
      ADD_FAILURE() << "out[" << i << "] = " << out[i] << ", fp64 " << ref[i];
    }
  }
  EXPECT_EQ(bad, 0) << "against the fp64 product of the dequantized operands";

  if (op != CollectiveOp::kAllGather || !given.lhs) return;
  // The gathered lhs: this replica's FP8 bytes in sequence order.
  const Shape& gs = plan.gathered_lhs_local();
  ASSERT_FALSE(gs.empty()) << "a pre-quantized lhs is the caller's: its gather can be handed out";
  Shape at = plan.lhs_offset();
  at[tbs ? 0 : 1] = 0;
  const auto gathered_want = shard(hx.bytes, d0.lhs_shape, at, gs);
  BackendBuffer gathered(be, gathered_want.size());
  for (bool overlapped : {true, false}) {
    gathered.poison();
    Operands in(qx.rowwise(), given.rhs ? qw.colwise() : wb.get(), bb.get(), got.get());
    in.set_input(Operand::kLhsScaleInv, qx.scale_inv());
    if (given.rhs) in.set_input(Operand::kRhsScaleInv, qw.scale_inv());
    in.set_output(Operand::kGatheredLhs, gathered.get());
    call(plan, overlapped, in);
    EXPECT_EQ(gathered.bytes_back(), gathered_want)
        << (overlapped ? "overlapped" : "sequential") << " gathered lhs";
  }
}

TEST(Prequantized, OperandsEqualTheGemmThatQuantizesThem) {
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kNone}) {
    for (bool tbs : {false, true}) {
      for (ScalingMode mode :
           {ScalingMode::kCurrentTensorScaling, ScalingMode::kDelayedTensorScaling}) {
        for (const Given& g : {Given{"lhs", true, false}, Given{"rhs", false, true},
                               Given{"lhs and rhs", true, true}}) {
          run_case(op, tbs, mode, g);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(Prequantized, LayoutsAndModesItDoesNotTakeAreRefusedWithOneMessage) {
  const GemmDesc ag =
      base_desc(CollectiveOp::kAllGather, false, ScalingMode::kCurrentTensorScaling);
  const Shape w_local = GemmPlan(*g_ctx, ag).rhs_local();
  GemmDesc kn = ag;
  kn.quantization.rhs_quantized = true;  // the rhs as [K, N]: contracting its leading dim
  const std::string rhs_why = error_of([&] { GemmPlan p(*g_ctx, kn); });
  EXPECT_NE(rhs_why.find("GEMM 'all_gather': the pre-quantized rhs " + shape_str(w_local) +
                         " contracts its leading dims"),
            std::string::npos)
      << rhs_why;

  // A plain GEMM's lhs [K, M] contracting its leading dim (a wgrad's x^T).
  GemmDesc wgrad;
  wgrad.name = "wgrad";
  wgrad.lhs_shape = {64, 32};
  wgrad.rhs_shape = {64, 16};
  wgrad.lhs_spec = {SpecEntry::none(), SpecEntry::none()};
  wgrad.rhs_spec = wgrad.lhs_spec;
  wgrad.contracting_dims = {{0}, {0}};
  wgrad.quantization.mode = ScalingMode::kCurrentTensorScaling;
  wgrad.quantization.lhs_quantized = true;
  const std::string lhs_why = error_of([&] { GemmPlan p(*g_ctx, wgrad); });
  EXPECT_NE(lhs_why.find("GEMM 'wgrad': the pre-quantized lhs [64, 32] contracts its leading dims"),
            std::string::npos)
      << lhs_why;

  GemmDesc mx = wgrad;
  mx.contracting_dims = {{1}, {0}};
  mx.lhs_shape = {128, 128};
  mx.rhs_shape = {128, 128};
  mx.quantization.mode = ScalingMode::kMxfp8_1d;
  const std::string mx_why = error_of([&] { GemmPlan p(*g_ctx, mx); });
  EXPECT_NE(mx_why.find("a pre-quantized lhs takes one scale_inv per tensor"), std::string::npos)
      << mx_why;

  // A pre-quantized operand needs a per-tensor scaling mode (without one its FP8 bytes would be
  // read as the bf16 GEMM's).
  GemmDesc unscaled = ag;
  unscaled.quantization.mode = ScalingMode::kNoScaling;
  unscaled.quantization.lhs_quantized = unscaled.quantization.rhs_quantized = true;
  const std::string none_why = error_of([&] { GemmPlan p(*g_ctx, unscaled); });
  EXPECT_NE(none_why.find("GEMM 'all_gather': a pre-quantized lhs needs a per-tensor scaling mode"),
            std::string::npos)
      << none_why;

  // A call without the scale_inv of its pre-quantized operand.
  GemmDesc given =
      base_desc(CollectiveOp::kReduceScatter, false, ScalingMode::kCurrentTensorScaling);
  given.quantization.lhs_quantized = true;
  GemmPlan plan(*g_ctx, given);
  Backend& be = g_ctx->backend();
  BackendBuffer lhs(be, static_cast<size_t>(num_elements(plan.lhs_local())));
  BackendBuffer rhs(be, static_cast<size_t>(num_elements(plan.rhs_local())) * 2);
  BackendBuffer bias(be, static_cast<size_t>(num_elements(plan.bias_local())) * 4);
  BackendBuffer out(be, static_cast<size_t>(num_elements(plan.out_local())) * 4);
  const std::string slot_why =
      error_of([&] { plan.execute(Operands(lhs.get(), rhs.get(), bias.get(), out.get())); });
  EXPECT_NE(slot_why.find("lhs_scale_inv"), std::string::npos) << slot_why;
  EXPECT_EQ(lhs_input_dtype(given), DType::kFloat8E4M3);
  EXPECT_EQ(rhs_input_dtype(given), DType::kBFloat16);
  EXPECT_EQ(plan.description().bytes.lhs, num_elements(plan.lhs_local()));  // one byte each
}

TEST(Prequantized, QuantizedTensorRefusesWhatItDoesNotTake) {
  const auto why = [](QuantizedTensorDesc d) {
    return error_of([&] { QuantizedTensor t(*g_ctx, std::move(d)); });
  };
  QuantizedTensorDesc ok;
  ok.name = "w";
  ok.shape = {16, 32};
  QuantizedTensorDesc three = ok;
  three.shape = {2, 16, 32};
  EXPECT_NE(why(three).find("quantized tensor 'w': a 2-D shard"), std::string::npos);
  QuantizedTensorDesc fp4 = ok;
  fp4.format = DType::kFloat4E2M1;
  EXPECT_NE(why(fp4).find("quantizes into e4m3 or e5m2"), std::string::npos);
  QuantizedTensorDesc mx = ok;
  mx.mode = ScalingMode::kMxfp8_1d;
  EXPECT_NE(why(mx).find("takes per-tensor scaling"), std::string::npos);
  QuantizedTensorDesc neither = ok;
  neither.rowwise = neither.colwise = false;
  EXPECT_NE(why(neither).find("keeps neither copy"), std::string::npos);
  QuantizedTensor t(*g_ctx, ok);
  EXPECT_NE(error_of([&] { t.quantize(nullptr); }).find("quantized tensor 'w': null source"),
            std::string::npos);
  EXPECT_NE(t.colwise(), nullptr);
  // Delayed scaling's state holds the history: saved and set back as a plan's.
  QuantizedTensorDesc delayed = ok;
  delayed.mode = ScalingMode::kDelayedTensorScaling;
  delayed.recipe.amax_history_len = 8;
  QuantizedTensor h(*g_ctx, delayed);
  const std::vector<float> s = h.scale_state();
  EXPECT_EQ(s.size(), static_cast<size_t>(ScaleStateLayout::floats(8)));
  EXPECT_EQ(s[ScaleStateLayout::kScale], 1.0f);
  EXPECT_NE(error_of([&] { h.set_scale_state({1.0f}); }).find("scale state"), std::string::npos);
}

// quantize_into (the caller's buffers: the C API's and the torch layers' path) writes the bytes
// quantize() writes into the tensor's copies, and both advance one delayed history.
// Delayed scaling's casts measure the amax as they read the source (QuantizeTask::amax: no
// second read). The state's amax and its history's entry are max |x| over every rank's shard,
// NaNs skipped, and the scale is fp8_max over it: for a QuantizedTensor keeping either copy or
// both (the first cast measures), and for a GEMM plan quantizing both operands, on both paths.
TEST(Prequantized, DelayedScalingRecordsTheGlobalAmaxItsCastsMeasured) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Backend& be = g_ctx->backend();
  const int64_t r = 24, c = 40;
  // Each rank's own values in (-1, 1), a NaN, and its largest magnitude 3 + rank (negative on
  // odd ranks), so the global amax is 3 + world - 1 and comes from the last rank.
  std::mt19937 rng(g_seed + 13 + static_cast<uint32_t>(rank));
  std::uniform_real_distribution<double> ud(-1.0, 1.0);
  std::vector<double> x(static_cast<size_t>(r * c));
  for (double& v : x) v = ud(rng);
  x[static_cast<size_t>(5 + rank)] = std::nan("");
  x[static_cast<size_t>(r * c - 1 - rank)] = (rank % 2 != 0 ? -1.0 : 1.0) * (3.0 + rank);
  const float want = 3.0f + static_cast<float>(world - 1);
  const BackendBuffer src(be, x, DType::kBFloat16);
  const auto expect_recorded = [&](const std::vector<float>& s, size_t at, int64_t entry,
                                   float amax, const std::string& what) {
    EXPECT_EQ(s[at + ScaleStateLayout::kAmax], amax) << what;
    EXPECT_EQ(s[at + ScaleStateLayout::kHistory + static_cast<size_t>(entry)], amax) << what;
    EXPECT_EQ(s[at + ScaleStateLayout::kScale], 448.0f / amax) << what;
  };
  for (const auto& [rowwise, colwise] :
       std::vector<std::pair<bool, bool>>{{true, false}, {false, true}, {true, true}}) {
    QuantizedTensorDesc d;
    d.name = "x";
    d.shape = {r, c};
    d.mode = ScalingMode::kDelayedTensorScaling;
    d.recipe.amax_history_len = 4;
    d.rowwise = rowwise;
    d.colwise = colwise;
    QuantizedTensor q(*g_ctx, d);
    q.quantize(src.get());
    expect_recorded(q.scale_state(), 0, 0, want,
                    std::string("quantized tensor, ") + (rowwise ? "rowwise " : "") +
                        (colwise ? "colwise" : ""));
  }

  for (const CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    const GemmDesc d = base_desc(op, false, ScalingMode::kDelayedTensorScaling);
    GemmPlan plan(*g_ctx, d);
    const Shape ws{d.rhs_shape[0], d.rhs_shape[1]};
    const BackendBuffer bb(
        be, std::vector<double>(static_cast<size_t>(num_elements(plan.bias_local())), 0.5),
        DType::kFloat32);
    BackendBuffer out(be, static_cast<size_t>(num_elements(plan.out_local())) * sizeof(float));
    for (int entry = 0; entry < 2; ++entry) {  // the overlapped path, then the sequential one
      // Fresh tensors each call (random_tensor's magnitudes are at most 1), each with one
      // largest magnitude, planted where another rank holds it from call to call: a cast that
      // skipped its amax, or read part of its source, leaves another value.
      auto gx = test::random_tensor(d.lhs_shape, DType::kBFloat16, g_seed, 21 + 2 * entry);
      auto gw = test::random_tensor(ws, DType::kBFloat16, g_seed, 22 + 2 * entry);
      const float ax = 2.0f + static_cast<float>(entry), aw = 4.0f + static_cast<float>(entry);
      gx[entry == 0 ? gx.size() - 1 : gx.size() / 3] = -ax;
      gw[entry == 0 ? 0 : gw.size() - 2] = aw;
      const BackendBuffer xb(be, shard(gx, d.lhs_shape, plan.lhs_offset(), plan.lhs_local()),
                             DType::kBFloat16);
      const BackendBuffer wb(be, shard(gw, ws, plan.rhs_offset(), plan.rhs_local()),
                             DType::kBFloat16);
      call(plan, entry == 0, Operands(xb.get(), wb.get(), bb.get(), out.get()));
      const std::vector<float> s = plan.scale_state();
      const std::string what =
          std::string(collective_name(op)) + " plan, call " + std::to_string(entry);
      expect_recorded(s, 0, entry, ax, what + ": lhs");
      expect_recorded(s, s.size() / 2, entry, aw, what + ": rhs");
    }
  }
}

TEST(Prequantized, QuantizeIntoTheCallersBuffersGivesTheSameBytes) {
  std::mt19937 rng(g_seed + 7);
  std::normal_distribution<double> nd(0.0, 2.0);
  const int64_t r = 24, c = 40;  // this rank's shard; every rank draws its own
  std::vector<double> x(static_cast<size_t>(r * c));
  for (double& v : x) v = nd(rng) + 0.01;
  Backend& be = g_ctx->backend();
  const BackendBuffer src(be, x, DType::kBFloat16);
  for (const ScalingMode mode :
       {ScalingMode::kCurrentTensorScaling, ScalingMode::kDelayedTensorScaling}) {
    QuantizedTensorDesc d;
    d.name = "x";
    d.shape = {r, c};
    d.format = DType::kFloat8E5M2;
    d.mode = mode;
    d.recipe.amax_history_len = 4;
    QuantizedTensor own(*g_ctx, d), into(*g_ctx, d);
    for (int call = 0; call < 3; ++call) {  // delayed: the scale of call 2 is call 1's amax
      BackendBuffer row(be, static_cast<size_t>(r * c)), col(be, static_cast<size_t>(r * c));
      BackendBuffer sinv(be, sizeof(float));
      own.quantize(src.get());
      into.quantize_into(src.get(), row.get(), col.get(), static_cast<float*>(sinv.get()));
      const std::vector<uint8_t> want = BackendBuffer::bytes_at(be, own.rowwise(), r * c);
      EXPECT_EQ(row.bytes_back(), want) << "call " << call;
      EXPECT_EQ(col.bytes_back(), BackendBuffer::bytes_at(be, own.colwise(), r * c));
      EXPECT_EQ(col.bytes_back(), transposed(want, r, c));
      EXPECT_EQ(sinv.bytes_back(), BackendBuffer::bytes_at(be, own.scale_inv(), sizeof(float)));
    }
    EXPECT_EQ(into.scale_state(), own.scale_state());
    // One tensor's quantize() and quantize_into() advance one history: a call of each gives
    // the scale_inv of two calls of one.
    QuantizedTensor mixed(*g_ctx, d);
    BackendBuffer row(be, static_cast<size_t>(r * c)), col(be, static_cast<size_t>(r * c));
    BackendBuffer sinv(be, sizeof(float));
    mixed.quantize(src.get());
    mixed.quantize_into(src.get(), row.get(), col.get(), static_cast<float*>(sinv.get()));
    QuantizedTensor twice(*g_ctx, d);
    twice.quantize(src.get());
    twice.quantize(src.get());
    EXPECT_EQ(sinv.bytes_back(), BackendBuffer::bytes_at(be, twice.scale_inv(), sizeof(float)));
  }
  QuantizedTensorDesc into_only;  // the C API's: no copies of its own
  into_only.name = "into";
  into_only.shape = {r, c};
  into_only.own_copies = false;
  QuantizedTensor lean(*g_ctx, into_only);
  EXPECT_EQ(lean.rowwise(), nullptr);
  EXPECT_EQ(lean.scale_inv(), nullptr);
  EXPECT_NE(error_of([&] { lean.quantize(src.get()); }).find("call quantize_into"),
            std::string::npos);
  QuantizedTensorDesc rows_only;
  rows_only.name = "r";
  rows_only.shape = {r, c};
  rows_only.colwise = false;
  QuantizedTensor t(*g_ctx, rows_only);
  BackendBuffer buf(be, static_cast<size_t>(r * c)), sinv(be, sizeof(float));
  auto* s = static_cast<float*>(sinv.get());
  EXPECT_NE(error_of([&] {
              t.quantize_into(src.get(), buf.get(), buf.get(), s);
            }).find("a colwise buffer was given, but the tensor keeps no colwise copy"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { t.quantize_into(src.get(), nullptr, nullptr, s); }).find("null rowwise copy"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              t.quantize_into(src.get(), buf.get(), nullptr, nullptr);
            }).find("null scale_inv"),
            std::string::npos);
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
    if (std::strncmp(argv[i], "--dp=", 5) == 0) cgemm::g_dp = std::atoi(argv[i] + 5);
  }
  cgemm::g_seed = std::random_device{}();
  MPI_Bcast(&cgemm::g_seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  const std::optional<cgemm::BackendOptions> backend = cgemm::test::backend_from_env();
  if (!backend) {
    if (rank == 0) std::printf("CGEMM_TEST_BACKEND=cuda, but some rank has no GPU: skipped\n");
    MPI_Finalize();
    return 0;
  }
  if (rank == 0) {
    std::printf("seed %u, dp %d x tp %d, backend %s\n", cgemm::g_seed, cgemm::g_dp,
                world / cgemm::g_dp, cgemm::test::backend_word(*backend));
  }
  cgemm::g_ctx = std::make_unique<cgemm::Context>(MPI_COMM_WORLD,
                                                  cgemm::MeshConfig{.dp = cgemm::g_dp, .tp = 0},
                                                  *backend, cgemm::OverlapOptions{});
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
