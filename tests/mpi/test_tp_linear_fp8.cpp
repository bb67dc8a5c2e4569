// The layer pair in FP8 (tp_linear.hpp, TpLinearDesc::quantization; issue 42 item 3) on the CPU
// backend under mpirun: 1 rank, tp 2, tp 3 and dp 2 x tp 2 (argument --dp=2).
//
// Every GEMM of forward and backward runs in FP8 (the forward e4m3 x e4m3, the gradients in
// e5m2 or e4m3), so each output is checked against the fp64 layer on the dequantized operands:
// x, W and dy each quantized once with one scale per global tensor (current scaling: from its
// amax; delayed: scale 1 on the first call, then from the history), which the host reproduces
// with float8.hpp's casts. The CPU backend's FP8 GEMM multiplies the codes exactly and sums in
// fp32, so the bound is fp32's. db stays in the layer's dtype (from dy unquantized). Both paths,
// both activation layouts, both modes and both gradient formats, two calls each; the caller's
// weight cache gives the same bits as the layer's own; what it does not run is refused.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "../support/error_of.hpp"
#include "../support/global_tensors.hpp"
#include "../support/linear_reference.hpp"
#include "cgemm/core/float8.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/tp_linear.hpp"

namespace cgemm {
namespace {

std::unique_ptr<Context> g_ctx;
uint32_t g_seed = 0;  // rank 0's, broadcast: every rank builds the same global tensors

using test::error_of;
using test::expect_near;
using test::linear_reference;
using test::shard;

std::vector<float> random_tensor(int64_t count, uint32_t stream) {
  std::mt19937 gen(g_seed + 7919u * stream);
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = sign(gen) ? mag(gen) : -mag(gen);
  return v;
}

std::vector<float> nan_buffer(const Shape& s) {
  return std::vector<float>(static_cast<size_t>(num_elements(s)), std::nanf(""));
}

// v dequantized after its quantization with one scale for the whole tensor: the first call of
// delayed scaling uses scale 1; otherwise fp8_max / amax (the history holds only this tensor's
// amax, so delayed scaling's later scales are current scaling's).
std::vector<double> dequantized(const std::vector<float>& v, DType format, bool scale_one) {
  float state[ScaleStateLayout::kHistory] = {1.0f, 1.0f, 0.0f, 0.0f};
  if (!scale_one) {
    float amax = 0.0f;
    for (float x : v) amax = std::max(amax, std::fabs(x));
    numeric::update_current_scale(state, amax, numeric::fp8_max(format), 0);
  }
  const float scale = state[ScaleStateLayout::kScale];
  const float scale_inv = state[ScaleStateLayout::kScaleInv];
  std::vector<double> out;
  out.reserve(v.size());
  for (float x : v) {
    const uint8_t code = numeric::float_to_narrow(x * scale, format);
    out.push_back(static_cast<double>(numeric::narrow_to_float(code, format)) *
                  static_cast<double>(scale_inv));
  }
  return out;
}

struct Fp8Case {
  LinearPath path;
  bool tbs;
  ScalingMode mode;
  DType grad_format;
};

std::string case_name(const Fp8Case& c) {
  return std::string(c.path == LinearPath::kSequential ? "sequential" : "overlapped") +
         (c.tbs ? " seq-first " : " batch-first ") + std::string(scaling_mode_name(c.mode)) +
         " grads " + std::string(dtype_name(c.grad_format));
}

// B = 2 dp, S = 8 tp, K = 16 tp, N = 32 tp: every FP8 GEMM's k (K, K/tp, N, N/tp, the local
// tokens) a multiple of 16, as cuBLASLt's FP8 alignment rule wants; K != N, so a swap of the
// two shows.
int64_t batch() { return 2 * g_ctx->comms().dp(); }
int64_t seq() { return 8 * g_ctx->comms().tp(); }
int64_t hidden_in() { return 16 * g_ctx->comms().tp(); }
int64_t hidden_out() { return 32 * g_ctx->comms().tp(); }

TpLinearDesc fp8_desc(const Fp8Case& c) {
  TpLinearDesc d;
  d.name = "fp8 layer";
  d.batch = batch();
  d.seq_len = seq();
  d.hidden_in = hidden_in();
  d.hidden_out = hidden_out();
  d.dtype = DType::kFloat32;
  d.transpose_batch_sequence = c.tbs;
  d.path = c.path;
  d.quantization.mode = c.mode;
  d.quantization.recipe.amax_history_len = 4;
  d.grad_format = c.grad_format;
  return d;
}

template <class Layer>
void check_fp8_layer(const Fp8Case& c) {
  SCOPED_TRACE(case_name(c));
  Layer layer(*g_ctx, fp8_desc(c));
  const GemmPlan& fwd = layer.forward_plan();
  const GemmPlan& dgrad = layer.dgrad_plan();
  const GemmPlan& wgrad = layer.wgrad_plan();
  const int64_t b = batch(), s = seq(), k = hidden_in(), n = hidden_out();
  const test::Dims d{b, s, k, n, c.tbs};
  const Shape act_k = c.tbs ? Shape{s, b, k} : Shape{b, s, k};
  const Shape act_n = c.tbs ? Shape{s, b, n} : Shape{b, s, n};
  const auto x = random_tensor(num_elements(act_k), 1);
  const auto w = random_tensor(k * n, 2);
  const auto bias = random_tensor(n, 3);
  const auto dy = random_tensor(num_elements(act_n), 4);
  ASSERT_EQ(layer.weight_local(), (Shape{fwd.rhs_local()[1], fwd.rhs_local()[0]}))
      << "the forward reads W's colwise copy";
  const auto x_l = shard(x, act_k, fwd.lhs_offset(), fwd.lhs_local());
  const auto w_l = shard(w, {k, n}, layer.weight_offset(), layer.weight_local());
  const auto b_l = shard(bias, {n}, fwd.bias_offset(), fwd.bias_local());
  const auto dy_l = shard(dy, act_n, dgrad.lhs_offset(), dgrad.lhs_local());
  const int dp = g_ctx->comms().dp();
  const int64_t b0 = g_ctx->comms().dp_rank() * b / dp, b1 = b0 + b / dp;
  const std::vector<double> bias_d(bias.begin(), bias.end());
  const std::vector<double> dy_d(dy.begin(), dy.end());
  const auto db_ref =
      linear_reference(d, std::vector<double>(x.begin(), x.end()),
                       std::vector<double>(w.begin(), w.end()), bias_d, dy_d, b0, b1)
          .db;
  std::vector<float> first_y, first_dx, first_dw, first_db;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE("call " + std::to_string(round));
    const bool one = c.mode == ScalingMode::kDelayedTensorScaling && round == 0;
    const auto ref = linear_reference(d, dequantized(x, DType::kFloat8E4M3, one),
                                      dequantized(w, DType::kFloat8E4M3, one), bias_d,
                                      dequantized(dy, c.grad_format, one), b0, b1);
    auto y = nan_buffer(fwd.out_local());
    auto dx = nan_buffer(dgrad.out_local());
    auto dw = nan_buffer(wgrad.out_local());
    auto db = nan_buffer(fwd.bias_local());
    layer.forward(x_l.data(), w_l.data(), b_l.data(), y.data());
    layer.backward(x_l.data(), w_l.data(), dy_l.data(), dx.data(), dw.data(), db.data());
    expect_near("y", y, ref.y, act_n, fwd.out_offset(), fwd.out_local(), 5e-6);
    expect_near("dx", dx, ref.dx, act_k, dgrad.out_offset(), dgrad.out_local(), 5e-6);
    expect_near("dW", dw, ref.dw, {k, n}, layer.weight_offset(), layer.weight_local(), 5e-6);
    expect_near("db", db, db_ref, {n}, fwd.bias_offset(), fwd.bias_local(), 2e-6);
    if (round == 0) {
      first_y = y;
      first_dx = dx;
      first_dw = dw;
      first_db = db;
    }
  }
  if (c.mode != ScalingMode::kCurrentTensorScaling) return;
  // The caller's weight cache, quantized once: the same bits as the layer's own.
  QuantizedTensor cache(*g_ctx, layer.weight_cache_desc());
  cache.quantize(w_l.data());
  auto y = nan_buffer(fwd.out_local());
  layer.forward(x_l.data(), cache, b_l.data(), y.data());
  auto dx = nan_buffer(dgrad.out_local());
  auto dw = nan_buffer(wgrad.out_local());
  auto db = nan_buffer(fwd.bias_local());
  layer.backward(x_l.data(), cache, dy_l.data(), dx.data(), dw.data(), db.data());
  // Current scaling: every call quantizes alike, so the caller's cache gives the layer's bits.
  for (const auto& [got, want, what] :
       {std::tuple{&y, &first_y, "y"}, std::tuple{&dx, &first_dx, "dx"},
        std::tuple{&dw, &first_dw, "dW"}, std::tuple{&db, &first_db, "db"}}) {
    EXPECT_EQ(std::memcmp(got->data(), want->data(), got->size() * sizeof(float)), 0)
        << what << ": the caller's cache gave other bits than the layer's own";
  }
}

std::vector<Fp8Case> cases() {
  std::vector<Fp8Case> out;
  for (LinearPath p : {LinearPath::kOverlapped, LinearPath::kSequential}) {
    for (bool tbs : {false, true}) {
      out.push_back({p, tbs, ScalingMode::kCurrentTensorScaling, DType::kFloat8E5M2});
      out.push_back({p, tbs, ScalingMode::kDelayedTensorScaling, DType::kFloat8E4M3});
    }
  }
  return out;
}

TEST(TpLinearFp8, ColumnParallelMatchesTheDequantizedReference) {
  for (const Fp8Case& c : cases()) check_fp8_layer<ColumnParallelLinear>(c);
}

TEST(TpLinearFp8, RowParallelMatchesTheDequantizedReference) {
  for (const Fp8Case& c : cases()) check_fp8_layer<RowParallelLinear>(c);
}

TEST(TpLinearFp8, RefusesWhatItDoesNotRun) {
  const Fp8Case c{LinearPath::kPolicy, false, ScalingMode::kCurrentTensorScaling,
                  DType::kFloat8E5M2};
  TpLinearDesc again = fp8_desc(c);
  again.wgrad_input = WgradInput::kGatherAgain;
  EXPECT_NE(error_of([&] { ColumnParallelLinear l(*g_ctx, again); }).find("gathering it again"),
            std::string::npos);
  TpLinearDesc mx = fp8_desc(c);
  mx.quantization.mode = ScalingMode::kMxfp8_1d;
  EXPECT_NE(error_of([&] {
              RowParallelLinear l(*g_ctx, mx);
            }).find("layer 'fp8 layer': FP8 training takes per-tensor scaling"),
            std::string::npos);
  TpLinearDesc grads = fp8_desc(c);
  grads.grad_format = DType::kBFloat16;
  EXPECT_NE(error_of([&] { RowParallelLinear l(*g_ctx, grads); }).find("grad_format"),
            std::string::npos);

  ColumnParallelLinear col(*g_ctx, fp8_desc(c));
  const std::vector<float> buf(1 << 16, 0.5f);
  std::vector<float> out(1 << 16);
  EXPECT_NE(error_of([&] {
              col.backward(buf.data(), buf.data(), buf.data(), out.data(), out.data(), out.data());
            }).find("forward() first"),
            std::string::npos);
  QuantizedTensorDesc wrong = col.weight_cache_desc();
  wrong.colwise = false;
  QuantizedTensor rowwise_only(*g_ctx, wrong);
  EXPECT_NE(error_of([&] {
              col.forward(buf.data(), rowwise_only, buf.data(), out.data());
            }).find("without both copies"),
            std::string::npos);
  QuantizedTensor cache_a(*g_ctx, col.weight_cache_desc()),
      cache_b(*g_ctx, col.weight_cache_desc());
  cache_a.quantize(buf.data());
  cache_b.quantize(buf.data());
  col.forward(buf.data(), cache_a, buf.data(), out.data());
  EXPECT_NE(error_of([&] {
              col.backward(buf.data(), cache_b, buf.data(), out.data(), out.data(), out.data());
            }).find("takes the weight cache its forward() took"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              col.backward(buf.data(), buf.data(), buf.data(), out.data(), out.data(), out.data());
            }).find("pass the cache to backward()"),
            std::string::npos);
  // The row layer's wgrad reads h's copy made by forward(): a backward needs that forward.
  RowParallelLinear row(*g_ctx, fp8_desc(c));
  QuantizedTensor row_cache(*g_ctx, row.weight_cache_desc());
  row_cache.quantize(buf.data());
  const std::vector<float> other(1 << 16, 0.25f);
  std::vector<float> dh(1 << 16);
  EXPECT_NE(error_of([&] {
              row.backward(buf.data(), row_cache, buf.data(), dh.data(), out.data(), out.data());
            }).find("backward() needs a forward() first"),
            std::string::npos);
  row.forward(buf.data(), row_cache, buf.data(), out.data());
  EXPECT_NE(error_of([&] {
              row.backward(other.data(), row_cache, buf.data(), dh.data(), out.data(), out.data());
            }).find("takes the h its forward() took"),
            std::string::npos);
  TpLinearDesc plain = fp8_desc(c);
  plain.quantization = QuantizationDesc{};
  RowParallelLinear bf(*g_ctx, plain);
  QuantizedTensor cache(*g_ctx, col.weight_cache_desc());
  EXPECT_NE(error_of([&] {
              bf.forward(buf.data(), cache, buf.data(), out.data());
            }).find("is for FP8 layers"),
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
  int dp = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--dp=", 5) == 0) dp = std::atoi(argv[i] + 5);
  }
  cgemm::g_seed = std::random_device{}();
  MPI_Bcast(&cgemm::g_seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  if (rank == 0) std::printf("seed %u, dp %d x tp %d\n", cgemm::g_seed, dp, world / dp);
  cgemm::g_ctx =
      std::make_unique<cgemm::Context>(MPI_COMM_WORLD, cgemm::MeshConfig{.dp = dp, .tp = 0},
                                       cgemm::BackendKind::kCpu, cgemm::OverlapOptions{});
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
