// GradientBuckets (runtime/include/cgemm/runtime/gradient_buckets.hpp) and the world's amax
// (Backend::all_reduce_max) under mpirun, on the CPU backend, or with --backend=cuda on the CUDA
// backend (ranks may share a GPU): every rank is a dp rank (tp 1), so 1, 2 or 3 ranks give dp 1,
// 2 or 3. Both make no copy to the host (Backend::copies_to_host counts them).
//
// Each rank draws its own gradients, fresh each round (never zero; rank 0's seed, broadcast, plus
// the rank), in fp32, bf16 or fp16; the sums are checked against an fp64 sum over the dp ranks of
// the gradients as given (MPI_Allgather of them), and the sums' buffers are poisoned with NaN
// after each check, so a value a later round does not rewrite shows.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cfloat>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/gradient_buckets.hpp"
#include "cgemm/runtime/tp_linear.hpp"  // detail::BackendMemory

namespace cgemm {
namespace {

std::unique_ptr<Context> g_ctx;
uint32_t g_seed = 0;

Backend& be() { return g_ctx->backend(); }
MPI_Comm dp_comm() { return g_ctx->comms().dp_comm(); }
int dp() { return g_ctx->comms().dp(); }
// CGEMM_TEST_DP_THROUGH_HOST on the CUDA backend: the dp group's collectives go through the host
// (its fallback), so a round copies to the host where it otherwise never does.
bool dp_through_host() {
  return be().kind() == BackendKind::kCuda && dp() > 1 &&
         env_flag(env::kTestDpThroughHost).value_or(false);
}
// The copies to the host a round or a world max made: none, unless through the host.
void expect_copies(int64_t before, const char* what) {
  if (dp_through_host()) {
    EXPECT_GT(be().copies_to_host(), before) << what << " did not go through the host";
  } else {
    EXPECT_EQ(be().copies_to_host(), before) << what << " copied to the host";
  }
}

// The model's four parameters in DDP's order (the last layer's first) and two more, of sizes that
// make buckets of one and of several slots.
std::vector<GradientSlot> model_slots() {
  return {{"W2", 40}, {"b2", 3}, {"W1", 33}, {"b1", 5}, {"norm", 2}, {"embed", 7}};
}

// This rank's values in +-[0.25, 1], rounded to `t`; `stream` tells rounds and slots apart.
std::vector<float> random_values(int64_t count, DType t, uint32_t stream) {
  std::mt19937 gen(g_seed + 7919u * stream +
                   104729u * static_cast<uint32_t>(g_ctx->comms().dp_rank()));
  std::uniform_real_distribution<float> mag(0.25f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = sign(gen) ? mag(gen) : -mag(gen);
  std::vector<char> raw(v.size() * dtype_size(t));
  convert_from_float(v.data(), raw.data(), t, count);
  convert_to_float(raw.data(), t, v.data(), count);
  return v;
}

// One slot's gradient in backend memory, in dtype t.
struct Grad {
  std::vector<float> host;  // the values as given (already rounded to t)
  std::unique_ptr<detail::BackendMemory> mem;
  Grad(const std::vector<float>& values, DType t)
      : host(values),
        mem(std::make_unique<detail::BackendMemory>(
            be(), std::max<size_t>(1, values.size() * dtype_size(t)))) {
    std::vector<char> raw(values.size() * dtype_size(t));
    convert_from_float(values.data(), raw.data(), t, static_cast<int64_t>(values.size()));
    be().copy_from_host(mem->get(), raw.data(), raw.size());
  }
};

std::vector<Grad> make_grads(const std::vector<GradientSlot>& slots, DType t, int round) {
  std::vector<Grad> g;
  for (size_t s = 0; s < slots.size(); ++s) {
    g.emplace_back(random_values(slots[s].count, t, static_cast<uint32_t>(round * 100 + s + 1)), t);
  }
  return g;
}

// The dp sum of `mine` in fp64 and the sum of magnitudes (the fp32 sum's error scale).
void reference(const std::vector<float>& mine, std::vector<double>& sum, std::vector<double>& mag) {
  const int n = static_cast<int>(mine.size());
  std::vector<float> all(mine.size() * static_cast<size_t>(dp()));
  ASSERT_EQ(MPI_Allgather(mine.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, dp_comm()),
            MPI_SUCCESS);
  sum.assign(mine.size(), 0.0);
  mag.assign(mine.size(), 0.0);
  for (int r = 0; r < dp(); ++r) {
    for (int i = 0; i < n; ++i) {
      const double x = all[static_cast<size_t>(r) * mine.size() + static_cast<size_t>(i)];
      sum[static_cast<size_t>(i)] += x;
      mag[static_cast<size_t>(i)] += std::abs(x);
    }
  }
}

// Slot `s`'s sums, read back from backend memory.
std::vector<float> summed_host(const GradientBuckets& gb, int s) {
  std::vector<float> v(static_cast<size_t>(gb.slot(s).count));
  be().copy_to_host(v.data(), gb.summed(s), v.size() * sizeof(float));
  return v;
}

// Poisons slot `s`'s sums (the memory is the object's own, writable: only the view is const): a
// value the next round leaves unwritten reads NaN there.
void poison(const GradientBuckets& gb, int s) {
  be().fill_nan(const_cast<float*>(gb.summed(s)), DType::kFloat32, gb.slot(s).count);
}

// Checks every slot's summed() against the reference, then poisons it.
void check_sums(const GradientBuckets& gb, const std::vector<Grad>& grads) {
  for (int s = 0; s < static_cast<int>(grads.size()); ++s) {
    SCOPED_TRACE("slot " + std::to_string(s) + " (" + gb.slot(s).name + ")");
    const std::vector<float>& mine = grads[static_cast<size_t>(s)].host;
    std::vector<double> want, mag;
    reference(mine, want, mag);
    const std::vector<float> got = summed_host(gb, s);
    ASSERT_EQ(got.size(), mine.size());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      // An fp32 sum of dp terms is within (dp - 1) units of roundoff of the sum of magnitudes.
      const double tol = dp() * static_cast<double>(FLT_EPSILON) * mag[i];
      if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= tol) && ++bad <= 3) {
        ADD_FAILURE() << "value " << i << ": " << got[i] << ", want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0);
    poison(gb, s);
  }
}

void run_rounds(const std::vector<GradientSlot>& slots, size_t bucket_bytes, DType t, int rounds,
                const std::vector<int>& order) {
  GradientBuckets gb(be(), slots, bucket_bytes);
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + ", " + std::string(dtype_name(t)) +
                 ", bucket_bytes " + std::to_string(bucket_bytes));
    const std::vector<Grad> grads = make_grads(slots, t, round);
    // The round itself stays on the backend: no copy to the host (check_sums makes its own),
    // unless the dp group goes through the host.
    const int64_t copies = be().copies_to_host();
    for (int s : order) gb.ready(s, grads[static_cast<size_t>(s)].mem->get(), t);
    gb.finish();
    expect_copies(copies, "the gradient sum");
    check_sums(gb, grads);
  }
  EXPECT_EQ(gb.rounds(), rounds);
}

std::vector<int> declared_order(size_t n) {
  std::vector<int> o(n);
  for (size_t i = 0; i < n; ++i) o[i] = static_cast<int>(i);
  return o;
}

// `body` throws cgemm::Error whose message contains `part`.
template <class F>
void expect_error(F body, const std::string& part) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << part;
  }
}

// --- the buckets' layout (local: no communication) ---

TEST(GradientBucketsLayout, TinyBucketsHoldOneSlotEach) {
  const auto slots = model_slots();
  GradientBuckets gb(be(), slots, 1);
  ASSERT_EQ(gb.num_buckets(), slots.size());
  for (size_t b = 0; b < slots.size(); ++b) {
    EXPECT_EQ(gb.bucket_slots(b), std::vector<int>{static_cast<int>(b)});
    EXPECT_EQ(gb.bucket_count(b), slots[b].count);
  }
}

TEST(GradientBucketsLayout, OneHugeBucketHoldsEverySlot) {
  GradientBuckets gb(be(), model_slots(), SIZE_MAX);
  ASSERT_EQ(gb.num_buckets(), 1u);
  EXPECT_EQ(gb.bucket_slots(0), declared_order(6));
  EXPECT_EQ(gb.bucket_count(0), 40 + 3 + 33 + 5 + 2 + 7);
}

TEST(GradientBucketsLayout, ABucketClosesBeforeItWouldPassItsBytes) {
  // 48 bytes = 12 fp32 values: {5, 3} (8 values; + 40 would pass), {40} alone (larger than a
  // bucket), {2, 8} (10 values; + 3 would pass), then {3, 9}: 12 values, exactly 48 bytes.
  const std::vector<GradientSlot> slots = {{"a", 5}, {"b", 3}, {"big", 40}, {"c", 2},
                                           {"d", 8}, {"e", 3}, {"f", 9}};
  GradientBuckets gb(be(), slots, 48);
  ASSERT_EQ(gb.num_buckets(), 4u);
  EXPECT_EQ(gb.bucket_slots(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(gb.bucket_slots(1), (std::vector<int>{2}));
  EXPECT_EQ(gb.bucket_slots(2), (std::vector<int>{3, 4}));
  EXPECT_EQ(gb.bucket_slots(3), (std::vector<int>{5, 6}));
  EXPECT_EQ(gb.bucket_of(4), 2u);
  EXPECT_EQ(gb.describe(),
            "bucket 0: 8 values (32 bytes): a, b\nbucket 1: 40 values (160 bytes): big\n"
            "bucket 2: 10 values (40 bytes): c, d\nbucket 3: 12 values (48 bytes): e, f\n");
  // One byte less and {e, f} would pass it.
  GradientBuckets smaller(be(), slots, 47);
  EXPECT_EQ(smaller.num_buckets(), 5u);
}

// --- the sums ---

TEST(GradientBuckets, TinyBucketsSumEverySlot) {
  for (DType t : {DType::kFloat32, DType::kBFloat16})
    run_rounds(model_slots(), 1, t, 3, declared_order(6));
}

TEST(GradientBuckets, OneHugeBucketSumsEverySlot) {
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    run_rounds(model_slots(), SIZE_MAX, t, 3, declared_order(6));
  }
}

TEST(GradientBuckets, ASlotLargerThanABucketSumsAlone) {
  // 64 bytes = 16 values: W2 (40) and W1 (33) stand alone; {b2} then {b1, norm, embed}.
  GradientBuckets layout(be(), model_slots(), 64);
  ASSERT_EQ(layout.num_buckets(), 4u);
  EXPECT_EQ(layout.bucket_slots(0), std::vector<int>{0});
  EXPECT_EQ(layout.bucket_slots(3), (std::vector<int>{3, 4, 5}));
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    run_rounds(model_slots(), 64, t, 3, declared_order(6));
  }
}

TEST(GradientBuckets, AnyReadinessOrderTheRanksShare) {
  // Not the declared order, the same on every rank: buckets start in the order they complete.
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    run_rounds(model_slots(), 64, t, 2, {5, 2, 3, 0, 4, 1});
  }
}

TEST(GradientBuckets, DpOneCommunicatesNothingAndSumsAreTheInput) {
  if (dp() != 1) GTEST_SKIP() << "dp " << dp();
  for (DType t : {DType::kFloat32, DType::kBFloat16}) {
    const auto slots = model_slots();
    GradientBuckets gb(be(), slots, 64);
    for (int round = 0; round < 2; ++round) {
      const std::vector<Grad> grads = make_grads(slots, t, round);
      for (int s = 0; s < 6; ++s) gb.ready(s, grads[static_cast<size_t>(s)].mem->get(), t);
      gb.finish();
      for (int s = 0; s < 6; ++s) {
        const auto got = summed_host(gb, s);
        const auto& want = grads[static_cast<size_t>(s)].host;
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << "slot " << s << " round " << round;
        poison(gb, s);
      }
    }
  }
}

TEST(GradientBuckets, DestroyedMidRoundWaitsItsStartedBuckets) {
  // As after an error thrown in the backward on every rank: buckets 0 and 1 started, never
  // finished.
  const auto slots = model_slots();
  const std::vector<Grad> grads = make_grads(slots, DType::kFloat32, 0);
  {
    GradientBuckets gb(be(), slots, 1);
    gb.ready(0, grads[0].mem->get(), DType::kFloat32);
    gb.ready(1, grads[1].mem->get(), DType::kFloat32);
  }
  // The dp group still works: nothing of the destroyed object is left pending on it.
  run_rounds(slots, 1, DType::kFloat32, 1, declared_order(6));
}

// --- the world's amax (current scaling's), through the same groups ---

TEST(WorldMax, TheMaxOverEveryRankStaysOnTheBackend) {
  // Each rank's amaxes (|x| >= 0), max-reduced over the world; the reference is MPI's max of the
  // same values on the host.
  const int count = 5;
  std::vector<float> mine = random_values(count, DType::kFloat32, 4242);
  for (float& x : mine) x = std::abs(x);
  std::vector<float> want(mine);
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, want.data(), count, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD),
            MPI_SUCCESS);
  detail::BackendMemory buf(be(), count * sizeof(float));
  be().copy_from_host(buf.get(), mine.data(), mine.size() * sizeof(float));
  const int64_t copies = be().copies_to_host();
  be().all_reduce_max(static_cast<float*>(buf.get()), count, 0, "test amaxes");
  be().synchronize();
  expect_copies(copies, "the world's max");
  std::vector<float> got(count, std::nanf(""));
  be().copy_to_host(got.data(), buf.get(), got.size() * sizeof(float));
  for (int i = 0; i < count; ++i)
    EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << i;
}

// --- errors ---

TEST(GradientBucketsErrors, BadBucketSize) {
  expect_error([] { GradientBuckets(be(), model_slots(), 0); },
               "GradientBuckets: bucket_bytes 0: a bucket holds at least 1 byte");
}

TEST(GradientBucketsErrors, BadSlots) {
  expect_error(
      [] {
        GradientBuckets(be(), {{"a", 2}, {"b", -1}}, 64);
      },
      "GradientBuckets: slot 1 (b) has count -1");
  expect_error(
      [] {
        GradientBuckets(be(), {{"a", 2}, {"huge", int64_t{INT_MAX} + 1}}, 64);
      },
      "GradientBuckets: slot 1 (huge) has 2147483648 elements: more than one all-reduce takes");
  expect_error(
      [] {
        GradientBuckets(be(), {{"a", 2}, {"b", 3}, {"a", 4}}, 64);
      },
      "GradientBuckets: slot 2 (a): the name is taken by another slot");
}

TEST(GradientBucketsErrors, UnknownSlotWrongDtypeAndNullGradient) {
  const auto slots = model_slots();
  const std::vector<Grad> grads = make_grads(slots, DType::kFloat32, 0);
  GradientBuckets gb(be(), slots, 64);
  const void* g = grads[0].mem->get();
  expect_error([&] { gb.ready(6, g, DType::kFloat32); },
               "GradientBuckets::ready: no slot 6 (6 slots, numbered from 0)");
  expect_error([&] { gb.ready(-1, g, DType::kFloat32); }, "GradientBuckets::ready: no slot -1");
  expect_error([&] { gb.ready(0, g, DType::kFloat8E4M3); },
               "GradientBuckets::ready: slot 0 (W2): dtype float8_e4m3fn: gradients are float32, "
               "bfloat16 or float16");
  expect_error([&] { gb.ready(1, nullptr, DType::kFloat32); },
               "GradientBuckets::ready: slot 1 (b2): null gradient of 3 elements");
  // The refused calls changed nothing: a whole round still sums right.
  for (int s = 0; s < 6; ++s)
    gb.ready(s, grads[static_cast<size_t>(s)].mem->get(), DType::kFloat32);
  gb.finish();
  check_sums(gb, grads);
}

TEST(GradientBucketsErrors, SlotReadyTwiceInARound) {
  const auto slots = model_slots();
  const std::vector<Grad> grads = make_grads(slots, DType::kBFloat16, 0);
  GradientBuckets gb(be(), slots, 64);
  gb.ready(3, grads[3].mem->get(), DType::kBFloat16);
  expect_error([&] { gb.ready(3, grads[3].mem->get(), DType::kBFloat16); },
               "GradientBuckets::ready: slot 3 (b1) is ready twice in round 1");
  for (int s : {0, 1, 2, 4, 5})
    gb.ready(s, grads[static_cast<size_t>(s)].mem->get(), DType::kBFloat16);
  gb.finish();
  check_sums(gb, grads);
}

TEST(GradientBucketsErrors, MissingSlotAtFinishThenACleanRound) {
  // Buckets at 64 bytes: {W2}, {b2}, {W1}, {b1, norm, embed}.
  const auto slots = model_slots();
  GradientBuckets gb(be(), slots, 64);
  const auto round = [&](int r, const std::vector<int>& ready) {
    std::vector<Grad> grads = make_grads(slots, DType::kFloat32, r);
    for (int s : ready) gb.ready(s, grads[static_cast<size_t>(s)].mem->get(), DType::kFloat32);
    return grads;
  };
  {
    const auto grads = round(0, declared_order(6));
    gb.finish();
    check_sums(gb, grads);
  }
  {
    const auto grads = round(1, {0, 1, 3});
    expect_error([&] { gb.finish(); },
                 "GradientBuckets::finish: round 2: not ready: slot 2 (W1), slot 4 (norm), slot 5 "
                 "(embed) (every slot must be ready() once per round, on every dp rank)");
    // The buckets that started were waited and hold this round's sums; the others none: {W1}
    // untouched this round (no stale sums of round 1), {b1, norm, embed} partly written.
    EXPECT_EQ(summed_host(gb, 1).size(), 3u);
    expect_error([&] { (void)gb.summed(2); },
                 "GradientBuckets::summed: slot 2 (W1): its bucket 2 holds no finished sum");
    expect_error([&] { (void)gb.summed(5); },
                 "GradientBuckets::summed: slot 5 (embed): its bucket 3 holds no finished sum");
  }
  const auto grads = round(2, declared_order(6));
  gb.finish();
  check_sums(gb, grads);
  EXPECT_EQ(gb.rounds(), 3);
}

TEST(GradientBucketsErrors, SummedBeforeFinish) {
  const auto slots = model_slots();
  GradientBuckets gb(be(), slots, 64);
  expect_error([&] { (void)gb.summed(1); },
               "GradientBuckets::summed: slot 1 (b2): its bucket 1 holds no finished sum");
  expect_error([&] { (void)gb.summed(9); }, "GradientBuckets::summed: no slot 9");
}

// --stall (2 ranks, a 3 s watchdog): rank 1 readies only bucket 0 and then stands still (as a
// rank stuck elsewhere); rank 0's all-reduce of bucket 1 waits until the watchdog ends the job
// with one line naming the bucket, its slot and the dp ranks.
int stall() {
  const auto slots = model_slots();
  const std::vector<Grad> grads = make_grads(slots, DType::kFloat32, 0);
  GradientBuckets gb(be(), slots, 64);
  const bool stuck = g_ctx->comms().dp_rank() == 1;
  for (int s = 0; s < (stuck ? 1 : 6); ++s) {
    gb.ready(s, grads[static_cast<size_t>(s)].mem->get(), DType::kFloat32);
  }
  if (stuck) std::this_thread::sleep_for(std::chrono::seconds(60));
  gb.finish();
  std::fprintf(stderr, "the stalled job was not ended\n");
  return 1;
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
  if (rank == 0) std::printf("seed %u, dp %d x tp 1\n", cgemm::g_seed, world);
  bool stall = false, cuda = false;
  for (int i = 1; i < argc; ++i) {
    stall = stall || std::string(argv[i]) == "--stall";
    cuda = cuda || std::string(argv[i]) == "--backend=cuda";
  }
  // The CUDA backend with gpu_sharing: dp ranks on one GPU reduce over the copy engines.
  cgemm::g_ctx = std::make_unique<cgemm::Context>(
      MPI_COMM_WORLD, cgemm::MeshConfig{.dp = world, .tp = 1},
      cgemm::BackendOptions{cuda ? cgemm::BackendKind::kCuda : cgemm::BackendKind::kCpu, cuda,
                            stall ? 3.0 : 300.0},
      cgemm::OverlapOptions{});
  if (rank == 0) std::printf("backend %s\n", cgemm::g_ctx->backend().name().c_str());
  if (stall) return cgemm::stall();
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
