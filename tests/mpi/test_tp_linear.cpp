// The tensor-parallel layer pair (runtime/include/cgemm/runtime/tp_linear.hpp) and the
// activation all-gather its weight gradients read (activation_gather.hpp), on the CPU backend
// under mpirun: 1 rank, tp 2, tp 3, tp 4 and dp 2 x tp 2 (argument --dp=2); and on meshes with
// an fsdp axis (--fsdp=N: fsdp 2, fsdp 3, fsdp 2 x tp 2, dp 2 x fsdp 2), where each rank passes
// its shard of W and gets its shard of dW, and dW and db are the sums over the whole batch.
//
// Every rank draws the same global tensors (x, W, b, dy; fresh random each run, rank 0's
// seed), takes its shards by the plans' offsets, and checks its output shards (poisoned with
// NaN first) against an fp64 reference computed here on the global tensors; every GEMM on the
// overlapped and on the sequential path. The gather is checked bit for bit.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/global_tensors.hpp"
#include "../support/linear_reference.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/runtime/activation_gather.hpp"
#include "cgemm/runtime/tp_linear.hpp"

namespace cgemm {
namespace {

std::unique_ptr<Context> g_ctx;
uint32_t g_seed = 0;  // rank 0's, broadcast: every rank builds the same global tensors

using test::shard;

// Global fp32 values in +-[0.25, 1], never zero; `stream` tells tensors apart.
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

// --- the activation gather ---

struct GatherCase {
  int64_t batch_per_dp;
  bool tbs;
  DType dtype;
};

TEST(ActivationGather, EqualsTheShardsInSequenceOrderBitForBit) {
  if (g_ctx->comms().fsdp() > 1) GTEST_SKIP() << "a gather over tp alone: the dp x tp meshes";
  const int tp = g_ctx->comms().tp(), dp = g_ctx->comms().dp();
  const int64_t seq_per_rank = 3, hidden = 5;
  for (const GatherCase& c :
       {GatherCase{1, false, DType::kFloat32}, GatherCase{3, false, DType::kFloat32},
        GatherCase{1, true, DType::kFloat32}, GatherCase{3, true, DType::kFloat32},
        GatherCase{2, false, DType::kBFloat16}}) {
    SCOPED_TRACE("batch " + std::to_string(c.batch_per_dp) + (c.tbs ? " seq-first" : "") + " " +
                 std::string(dtype_name(c.dtype)));
    const int64_t b = c.batch_per_dp * dp, s = seq_per_rank * tp;
    const Shape global = c.tbs ? Shape{s, b, hidden} : Shape{b, s, hidden};
    const size_t bd = c.tbs ? 1 : 0, sd = c.tbs ? 0 : 1;
    Shape local = global, offset{0, 0, 0};
    local[bd] = c.batch_per_dp;
    local[sd] = seq_per_rank;
    offset[bd] = g_ctx->comms().dp_rank() * c.batch_per_dp;
    offset[sd] = g_ctx->comms().tp_rank() * seq_per_rank;
    // The global tensor in the test's dtype, as bytes: the gather must move them untouched.
    const std::vector<float> values = random_tensor(num_elements(global), 11);
    const size_t es = dtype_size(c.dtype);
    std::vector<char> bytes(values.size() * es);
    convert_from_float(values.data(), bytes.data(), c.dtype, static_cast<int64_t>(values.size()));
    const auto element_shard = [&](const Shape& off, const Shape& loc) {
      std::vector<char> out(static_cast<size_t>(num_elements(loc)) * es);
      std::vector<int64_t> index(static_cast<size_t>(num_elements(global)));
      for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int64_t>(i);
      const auto picked = shard(index, global, off, loc);
      for (size_t i = 0; i < picked.size(); ++i) {
        std::memcpy(out.data() + i * es, bytes.data() + static_cast<size_t>(picked[i]) * es, es);
      }
      return out;
    };
    const std::vector<char> mine = element_shard(offset, local);
    ActivationGather gather(*g_ctx, "test", local, c.dtype, c.tbs);
    Shape want_shape = local, want_offset = offset;
    want_shape[sd] = s;
    want_offset[sd] = 0;
    ASSERT_EQ(gather.gathered(), want_shape);
    const std::vector<char> want = element_shard(want_offset, want_shape);
    ASSERT_EQ(static_cast<size_t>(gather.gathered_bytes()), want.size());
    std::vector<char> got(want.size(), static_cast<char>(0xff));  // 0xff...: NaN in fp32 and bf16
    for (int round = 0; round < 2; ++round) {                     // the reorder buffer is reused
      gather.execute(mine.data(), got.data());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << "round " << round;
      std::fill(got.begin(), got.end(), static_cast<char>(0xff));
    }
  }
}

TEST(ActivationGather, RefusesANonThreeDShardAndNullBuffers) {
  EXPECT_THROW(ActivationGather(*g_ctx, "bad", Shape{4, 5}, DType::kFloat32, false), Error);
  ActivationGather gather(*g_ctx, "ok", Shape{1, 2, 3}, DType::kFloat32, false);
  std::vector<float> buf(static_cast<size_t>(num_elements(gather.gathered())));
  EXPECT_THROW(gather.execute(nullptr, buf.data()), Error);
}

// --- the layers ---

using test::Dims;
using test::expect_near;
using test::linear_reference;
using test::Reference;

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

struct LayerCase {
  LinearPath path;
  bool tbs;
  bool bias;
  WgradInput wgrad_input;
};

std::string case_name(const LayerCase& c) {
  return std::string(c.path == LinearPath::kSequential ? "sequential" : "overlapped") +
         (c.tbs ? " seq-first" : " batch-first") + (c.bias ? " bias" : " no bias") +
         (c.wgrad_input == WgradInput::kGatherAgain ? " gather-again" : " keep");
}

std::vector<LayerCase> layer_cases() {
  std::vector<LayerCase> out;
  for (LinearPath p : {LinearPath::kOverlapped, LinearPath::kSequential}) {
    for (bool tbs : {false, true}) {
      out.push_back({p, tbs, true, WgradInput::kKeepFromForward});
      out.push_back({p, tbs, !tbs, WgradInput::kGatherAgain});
    }
  }
  return out;
}

// Global sizes divisible by tp 1..4 and the local batch by dp (gemm.py's reorders); with an
// fsdp axis two sequences per data-parallel rank.
int64_t global_batch() {
  const int dp = g_ctx->comms().dp(), fsdp = g_ctx->comms().fsdp();
  if (fsdp > 1) return 2 * dp * fsdp;
  return dp == 1 ? 3 : 2 * dp;
}
constexpr int64_t kSeq = 12;

TpLinearDesc layer_desc(const std::string& name, int64_t k, int64_t n, const LayerCase& c) {
  TpLinearDesc d;
  d.name = name;
  d.batch = global_batch();
  d.seq_len = kSeq;
  d.hidden_in = k;
  d.hidden_out = n;
  d.dtype = DType::kFloat32;
  d.bias = c.bias;
  d.transpose_batch_sequence = c.tbs;
  d.path = c.path;
  d.wgrad_input = c.wgrad_input;
  return d;
}

// The batches [b0, b1) whose gradients this rank's dW and db hold: its dp rank's, or with an
// fsdp axis all of them (the layers sum over fsdp and dp there).
std::pair<int64_t, int64_t> my_batches() {
  if (g_ctx->comms().fsdp() > 1) return {0, global_batch()};
  const int64_t per = global_batch() / g_ctx->comms().dp();
  return {g_ctx->comms().dp_rank() * per, (g_ctx->comms().dp_rank() + 1) * per};
}

// Runs one layer (forward, backward) on fresh global tensors and checks y, dx, dW, db.
template <class Layer>
void check_layer(const LayerCase& c, int64_t k, int64_t n) {
  SCOPED_TRACE(case_name(c));
  Layer layer(*g_ctx, layer_desc("layer", k, n, c));
  const GemmPlan& fwd = layer.forward_plan();
  const GemmPlan& dgrad = layer.dgrad_plan();
  const GemmPlan& wgrad = layer.wgrad_plan();
  // The dgrad reads the forward's W shard (with an fsdp axis, that shard gathered over fsdp).
  const int fsdp = g_ctx->comms().fsdp();
  if (fsdp == 1) {
    EXPECT_EQ(dgrad.rhs_local(), fwd.rhs_local());
    EXPECT_EQ(dgrad.rhs_offset(), fwd.rhs_offset());
  } else {
    EXPECT_EQ(num_elements(dgrad.rhs_local()), num_elements(fwd.rhs_local()) * fsdp);
    // The caller passes its shard of W and gets the same shard of dW.
    EXPECT_EQ(wgrad.out_local(), fwd.rhs_local());
    EXPECT_EQ(wgrad.out_offset(), fwd.rhs_offset());
  }
  EXPECT_EQ(dgrad.desc().collective, Layer::kCollectives.backward);

  const Dims d{global_batch(), kSeq, k, n, c.tbs};
  const Shape act_k = c.tbs ? Shape{kSeq, d.b, k} : Shape{d.b, kSeq, k};
  const Shape act_n = c.tbs ? Shape{kSeq, d.b, n} : Shape{d.b, kSeq, n};
  const auto x = random_tensor(num_elements(act_k), 1);
  const auto w = random_tensor(k * n, 2);
  const auto b = c.bias ? random_tensor(n, 3) : std::vector<float>{};
  const auto dy = random_tensor(num_elements(act_n), 4);
  const auto [b0, b1] = my_batches();
  const Reference ref = linear_reference(d, widen(x), widen(w), widen(b), widen(dy), b0, b1);

  // Activation offsets through the layer: with an fsdp axis its plans are one replica's. Its
  // batch block is this rank's of ('dp', 'fsdp'), dp-major.
  const auto at = [&](const Shape& plan_offset) { return layer.activation_offset(plan_offset); };
  if (fsdp > 1) {
    const auto& m = g_ctx->comms();
    const int64_t per = global_batch() / (m.dp() * fsdp);
    EXPECT_EQ(at(fwd.lhs_offset()).at(c.tbs ? 1 : 0),
              (static_cast<int64_t>(m.dp_rank()) * fsdp + m.fsdp_rank()) * per);
  }
  const auto x_l = shard(x, act_k, at(fwd.lhs_offset()), fwd.lhs_local());
  const auto w_l = shard(w, {k, n}, fwd.rhs_offset(), fwd.rhs_local());
  const auto b_l = c.bias ? shard(b, {n}, fwd.bias_offset(), fwd.bias_local()) : b;
  const auto dy_l = shard(dy, act_n, at(dgrad.lhs_offset()), dgrad.lhs_local());
  for (int round = 0; round < 2; ++round) {  // a second call reuses every plan's buffers
    auto y = nan_buffer(fwd.out_local());
    auto dx = nan_buffer(dgrad.out_local());
    auto dw = nan_buffer(wgrad.out_local());
    auto db = c.bias ? nan_buffer(fwd.bias_local()) : std::vector<float>{};
    layer.forward(x_l.data(), w_l.data(), c.bias ? b_l.data() : nullptr, y.data());
    layer.backward(x_l.data(), w_l.data(), dy_l.data(), dx.data(), dw.data(),
                   c.bias ? db.data() : nullptr);
    expect_near("y", y, ref.y, act_n, at(fwd.out_offset()), fwd.out_local(), 2e-6);
    expect_near("dx", dx, ref.dx, act_k, at(dgrad.out_offset()), dgrad.out_local(), 2e-6);
    expect_near("dW", dw, ref.dw, {k, n}, wgrad.out_offset(), wgrad.out_local(), 2e-6);
    if (c.bias) expect_near("db", db, ref.db, {n}, fwd.bias_offset(), fwd.bias_local(), 2e-6);
  }
}

TEST(TpLinear, ColumnParallelMatchesTheReference) {
  for (const LayerCase& c : layer_cases()) check_layer<ColumnParallelLinear>(c, 24, 36);
}

TEST(TpLinear, RowParallelMatchesTheReference) {
  for (const LayerCase& c : layer_cases()) check_layer<RowParallelLinear>(c, 36, 24);
}

// With an fsdp axis the layers keep no gathered weight: the context's fsdp ring and reorder
// buffer hold it while they live (sized for the largest layer), and go with the last of them.
TEST(TpLinear, FsdpBuffersAreTheContextsAndGoWithTheLayers) {
  if (g_ctx->comms().fsdp() == 1) GTEST_SKIP() << "no fsdp axis";
  ASSERT_EQ(g_ctx->fsdp_ring_bytes(), 0);
  ASSERT_EQ(g_ctx->fsdp_reorder_bytes(), 0);
  const LayerCase c{LinearPath::kOverlapped, false, true, WgradInput::kKeepFromForward};
  {
    ColumnParallelLinear col(*g_ctx, layer_desc("col", 24, 36, c));
    RowParallelLinear row(*g_ctx, layer_desc("row", 36, 24, c));
    // One gathered weight (the dgrad's whole tp shard of W), the same for both layers here.
    const int64_t whole = num_elements(row.dgrad_plan().rhs_local()) * 4;
    EXPECT_EQ(num_elements(col.dgrad_plan().rhs_local()) * 4, whole);
    EXPECT_EQ(g_ctx->fsdp_ring_bytes(), whole);
    EXPECT_EQ(g_ctx->fsdp_reorder_bytes(), whole);  // the row layer's column shards
  }
  EXPECT_EQ(g_ctx->fsdp_ring_bytes(), 0);
  EXPECT_EQ(g_ctx->fsdp_reorder_bytes(), 0);
}

TEST(TpLinear, LayersRefuseNullBuffersAndABackwardWithoutForward) {
  const LayerCase c{LinearPath::kPolicy, false, true, WgradInput::kKeepFromForward};
  ColumnParallelLinear col(*g_ctx, layer_desc("col", 24, 36, c));
  std::vector<float> dummy(4096, 1.0f);
  float* p = dummy.data();
  EXPECT_THROW(col.forward(p, p, nullptr, p), Error);         // planned with a bias
  EXPECT_THROW(col.backward(nullptr, p, p, p, p, p), Error);  // no forward() to keep x from
  {
    // One forward per backward: a second backward has no kept x (review: it reused a stale one).
    const GemmPlan& fwd = col.forward_plan();
    std::vector<float> x(static_cast<size_t>(num_elements(fwd.lhs_local())), 0.5f);
    std::vector<float> w(static_cast<size_t>(num_elements(fwd.rhs_local())), 0.25f);
    std::vector<float> b(static_cast<size_t>(num_elements(fwd.bias_local())), 1.0f);
    std::vector<float> y(static_cast<size_t>(num_elements(fwd.out_local())));
    std::vector<float> dy(static_cast<size_t>(num_elements(col.dgrad_plan().lhs_local())), 1.0f);
    std::vector<float> dx(static_cast<size_t>(num_elements(col.dgrad_plan().out_local())));
    std::vector<float> dw(static_cast<size_t>(num_elements(col.wgrad_plan().out_local())));
    std::vector<float> db(b.size());
    col.forward(x.data(), w.data(), b.data(), y.data());
    col.backward(nullptr, w.data(), dy.data(), dx.data(), dw.data(), db.data());
    EXPECT_THROW(col.backward(nullptr, w.data(), dy.data(), dx.data(), dw.data(), db.data()),
                 Error);
  }
  RowParallelLinear row(*g_ctx, layer_desc("row", 36, 24, c));
  EXPECT_THROW(row.backward(p, p, nullptr, p, p, p), Error);
  // The planner's rules hold: a sequence tp does not divide is refused at construction.
  if (g_ctx->comms().tp() > 1) {
    TpLinearDesc bad = layer_desc("bad", 24, 36, c);
    bad.seq_len = g_ctx->comms().tp() + 1;
    EXPECT_THROW(ColumnParallelLinear(*g_ctx, bad), Error);
  }
}

// The row layer's dgrad gathers dy for its wgrad, so it runs first and the wgrad reads h after
// dh is written: dh over h (allowed before, when the wgrad ran first; a review had found dW
// wrong when the order was not kept) is refused before any work, in whole and in part.
TEST(TpLinear, RowParallelRefusesDhOverH) {
  const LayerCase c{LinearPath::kOverlapped, false, true, WgradInput::kKeepFromForward};
  RowParallelLinear row(*g_ctx, layer_desc("row", 36, 24, c));
  const GemmPlan& fwd = row.forward_plan();
  const auto h = random_tensor(num_elements(fwd.lhs_local()), 31);
  const auto w = random_tensor(num_elements(fwd.rhs_local()), 32);
  const auto dy = random_tensor(num_elements(row.dgrad_plan().lhs_local()), 33);
  for (size_t shift : {size_t{0}, h.size() / 2}) {
    SCOPED_TRACE("dh " + std::to_string(shift) + " elements into h");
    std::vector<float> buf(h.size() * 2, 0.0f);
    std::copy(h.begin(), h.end(), buf.begin());
    auto dw = nan_buffer(row.wgrad_plan().out_local());
    auto db = nan_buffer(fwd.bias_local());
    try {
      row.backward(buf.data(), w.data(), dy.data(), buf.data() + shift, dw.data(), db.data());
      ADD_FAILURE() << "dh over h must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("dh overlaps h"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(std::equal(h.begin(), h.end(), buf.begin())) << "h was written";
    EXPECT_TRUE(std::all_of(dw.begin(), dw.end(), [](float v) { return std::isnan(v); }));
  }
}

// The MLP: column (K -> F), h = tanh(y1), row (F -> N); backward through all three.
TEST(TpLinear, ColumnThenRowChainedMatchesTheReference) {
  const int64_t k = 12, f = 24, n = 12;
  for (const LayerCase& c : layer_cases()) {
    SCOPED_TRACE(case_name(c));
    ColumnParallelLinear col(*g_ctx, layer_desc("up", k, f, c));
    RowParallelLinear row(*g_ctx, layer_desc("down", f, n, c));
    // The column layer's output shard is the row layer's input shard.
    ASSERT_EQ(col.forward_plan().out_local(), row.forward_plan().lhs_local());
    ASSERT_EQ(col.forward_plan().out_offset(), row.forward_plan().lhs_offset());

    const int64_t bsz = global_batch();
    const Dims d1{bsz, kSeq, k, f, c.tbs}, d2{bsz, kSeq, f, n, c.tbs};
    const Shape act_k = c.tbs ? Shape{kSeq, bsz, k} : Shape{bsz, kSeq, k};
    const Shape act_f = c.tbs ? Shape{kSeq, bsz, f} : Shape{bsz, kSeq, f};
    const Shape act_n = c.tbs ? Shape{kSeq, bsz, n} : Shape{bsz, kSeq, n};
    const auto x = random_tensor(num_elements(act_k), 21);
    const auto w1 = random_tensor(k * f, 22);
    const auto b1 = c.bias ? random_tensor(f, 23) : std::vector<float>{};
    const auto w2 = random_tensor(f * n, 24);
    const auto b2 = c.bias ? random_tensor(n, 25) : std::vector<float>{};
    const auto dy = random_tensor(num_elements(act_n), 26);

    // Reference: y1 = x W1 + b1, h = tanh(y1), y2 = h W2 + b2; dh from the row layer, then
    // dy1 = dh (1 - h^2) into the column layer.
    const auto [lo, hi] = my_batches();
    const Reference r1_fwd = linear_reference(d1, widen(x), widen(w1), widen(b1),
                                              std::vector<double>(x.size() / k * f), lo, hi);
    std::vector<double> h(r1_fwd.y.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = std::tanh(r1_fwd.y[i]);
    const Reference r2 = linear_reference(d2, h, widen(w2), widen(b2), widen(dy), lo, hi);
    std::vector<double> dy1(h.size());
    for (size_t i = 0; i < h.size(); ++i) dy1[i] = r2.dx[i] * (1.0 - h[i] * h[i]);
    const Reference r1 = linear_reference(d1, widen(x), widen(w1), widen(b1), dy1, lo, hi);

    const GemmPlan& f1 = col.forward_plan();
    const GemmPlan& f2 = row.forward_plan();
    const auto at = [&](const Shape& plan_offset) { return col.activation_offset(plan_offset); };
    const auto x_l = shard(x, act_k, at(f1.lhs_offset()), f1.lhs_local());
    const auto w1_l = shard(w1, {k, f}, f1.rhs_offset(), f1.rhs_local());
    const auto b1_l = c.bias ? shard(b1, {f}, f1.bias_offset(), f1.bias_local()) : b1;
    const auto w2_l = shard(w2, {f, n}, f2.rhs_offset(), f2.rhs_local());
    const auto b2_l = c.bias ? shard(b2, {n}, f2.bias_offset(), f2.bias_local()) : b2;
    const auto dy_l =
        shard(dy, act_n, at(row.dgrad_plan().lhs_offset()), row.dgrad_plan().lhs_local());

    auto y1 = nan_buffer(f1.out_local());
    auto y2 = nan_buffer(f2.out_local());
    col.forward(x_l.data(), w1_l.data(), c.bias ? b1_l.data() : nullptr, y1.data());
    std::vector<float> h_l(y1.size());
    for (size_t i = 0; i < h_l.size(); ++i) h_l[i] = std::tanh(y1[i]);
    row.forward(h_l.data(), w2_l.data(), c.bias ? b2_l.data() : nullptr, y2.data());

    auto dh = nan_buffer(row.dgrad_plan().out_local());
    auto dw2 = nan_buffer(row.wgrad_plan().out_local());
    auto db2 = c.bias ? nan_buffer(f2.bias_local()) : std::vector<float>{};
    row.backward(h_l.data(), w2_l.data(), dy_l.data(), dh.data(), dw2.data(),
                 c.bias ? db2.data() : nullptr);
    std::vector<float> dy1_l(dh.size());
    for (size_t i = 0; i < dy1_l.size(); ++i) dy1_l[i] = dh[i] * (1.0f - h_l[i] * h_l[i]);
    auto dx = nan_buffer(col.dgrad_plan().out_local());
    auto dw1 = nan_buffer(col.wgrad_plan().out_local());
    auto db1 = c.bias ? nan_buffer(f1.bias_local()) : std::vector<float>{};
    col.backward(x_l.data(), w1_l.data(), dy1_l.data(), dx.data(), dw1.data(),
                 c.bias ? db1.data() : nullptr);

    constexpr double kTol = 2e-5;  // tanh of fp32 sums, then two more GEMMs
    expect_near("y1", y1, r1_fwd.y, act_f, at(f1.out_offset()), f1.out_local(), kTol);
    expect_near("y2", y2, r2.y, act_n, at(f2.out_offset()), f2.out_local(), kTol);
    expect_near("dh", dh, r2.dx, act_f, at(row.dgrad_plan().out_offset()),
                row.dgrad_plan().out_local(), kTol);
    expect_near("dW2", dw2, r2.dw, {f, n}, row.wgrad_plan().out_offset(),
                row.wgrad_plan().out_local(), kTol);
    expect_near("dx", dx, r1.dx, act_k, at(col.dgrad_plan().out_offset()),
                col.dgrad_plan().out_local(), kTol);
    expect_near("dW1", dw1, r1.dw, {k, f}, col.wgrad_plan().out_offset(),
                col.wgrad_plan().out_local(), kTol);
    if (c.bias) {
      expect_near("db2", db2, r2.db, {n}, f2.bias_offset(), f2.bias_local(), kTol);
      expect_near("db1", db1, r1.db, {f}, f1.bias_offset(), f1.bias_local(), kTol);
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
  int dp = 1, fsdp = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--dp=", 0) == 0) dp = std::stoi(a.substr(5));
    if (a.rfind("--fsdp=", 0) == 0) fsdp = std::stoi(a.substr(7));
  }
  cgemm::g_seed = std::random_device{}();
  MPI_Bcast(&cgemm::g_seed, 1, MPI_UINT32_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("seed %u, dp %d x fsdp %d x tp %d\n", cgemm::g_seed, dp, fsdp, world / dp / fsdp);
  }
  cgemm::g_ctx = std::make_unique<cgemm::Context>(
      MPI_COMM_WORLD, cgemm::MeshConfig{.dp = dp, .tp = 0, .fsdp = fsdp}, cgemm::BackendKind::kCpu,
      cgemm::OverlapOptions{});
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
