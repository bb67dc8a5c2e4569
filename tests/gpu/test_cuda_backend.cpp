// The CUDA backend on its own, under mpirun (every rank one GPU, one TP group of all ranks):
// its kernels against the CPU definitions, and its exchanges (copy engines and NCCL) under
// buffer reuse with no host synchronisation between iterations. Skips without a GPU.
// With CGEMM_TEST_GPU_SHARING=1 the ranks share the GPUs (local rank modulo the GPU count):
// no NCCL communicator, the reference collectives over the copy engines, and use_ce = off
// must be refused with one clear error.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/sharding/reorder.hpp"

namespace cgemm {
namespace {

std::unique_ptr<MeshComms> g_comms;
std::unique_ptr<Backend> g_backends[2];  // [use_ce]

bool all_have_gpu() {
  int ok = cuda_backend_available() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
}

bool sharing() { return env_flag(env::kTestGpuSharing).value_or(false); }

CudaPlacement placement() {
  CudaPlacement p;
  p.device = g_comms->local_rank() % std::max(cuda_device_count(), 1);
  p.gpu_sharing = sharing();
  p.ranks_per_gpu = p.gpu_sharing ? (g_comms->local_size() + cuda_device_count() - 1) /
                                        std::max(cuda_device_count(), 1)
                                  : 1;
  return p;
}

Backend& backend(bool use_ce) {
  auto& b = g_backends[use_ce ? 1 : 0];
  if (!b) {
    OverlapOptions o;
    o.use_ce = use_ce;
    b = make_cuda_backend(*g_comms, o, placement());
    if (g_comms->world_rank() == 0) {
      std::printf("--- backend (use_ce=%d): transport %s\n%s\n", use_ce ? 1 : 0,
                  b->transport().c_str(), b->describe().c_str());
    }
  }
  return *b;
}

// Device buffer owned by a backend.
struct Buf {
  Backend& be;
  void* p;
  Buf(Backend& b, size_t bytes) : be(b), p(b.allocate(bytes)) {}
  ~Buf() { be.release(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

template <typename T>
std::vector<T> to_host(Backend& be, const void* p, size_t count) {
  std::vector<T> v(count);
  be.copy_to_host(v.data(), p, count * sizeof(T));
  return v;
}

class CudaBackendTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
    if (sharing() && !GetParam())
      GTEST_SKIP() << "NCCL needs a GPU per rank (see SharingRefusesNccl)";
  }
};

// --- kernels against their CPU definitions ---

TEST_P(CudaBackendTest, FillNormalMatchesHostGenerator) {
  Backend& be = backend(GetParam());
  const Shape global = {3, 40, 24};
  const Shape local = {2, 20, 24};
  const Shape offset = {1, 20, 0};
  const int64_t count = num_elements(local);
  for (const DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    Buf d(be, static_cast<size_t>(count) * dtype_size(t));
    be.fill_normal(d.p, t, global, local, offset, 1234, 0.5f);
    std::vector<unsigned char> got(static_cast<size_t>(count) * dtype_size(t));
    be.copy_to_host(got.data(), d.p, got.size());
    std::vector<float> want_f(static_cast<size_t>(count));
    int64_t i = 0;
    for (int64_t a = 0; a < local[0]; ++a) {
      for (int64_t b = 0; b < local[1]; ++b) {
        for (int64_t c = 0; c < local[2]; ++c, ++i) {
          const int64_t flat =
              ((offset[0] + a) * global[1] + offset[1] + b) * global[2] + offset[2] + c;
          want_f[static_cast<size_t>(i)] =
              numeric::normal_value(1234, static_cast<uint64_t>(flat), 0.5f);
        }
      }
    }
    std::vector<unsigned char> want(got.size());
    convert_from_float(want_f.data(), want.data(), t, count);
    std::vector<float> got_f(static_cast<size_t>(count)), want_back(static_cast<size_t>(count));
    convert_to_float(got.data(), t, got_f.data(), count);
    convert_to_float(want.data(), t, want_back.data(), count);
    int64_t differ = 0;
    double worst = 0.0;  // absolute, in units of std
    for (size_t k = 0; k < got_f.size(); ++k) {
      if (std::memcmp(got.data() + k * dtype_size(t), want.data() + k * dtype_size(t),
                      dtype_size(t)) != 0) {
        ++differ;
      }
      worst = std::max(worst, std::abs(static_cast<double>(got_f[k]) - want_back[k]) / 0.5);
    }
    // CUDA's logf/cosf are not glibc's: fp32 values may differ in the last bits (seen on H200:
    // most elements, up to 3.4e-5 relative where cos is near 0), which rounding to bf16/fp16
    // almost always hides. A wrong index or dtype would differ by O(std).
    const double allowed = t == DType::kFloat32 ? 1e-5 : t == DType::kBFloat16 ? 2e-2 : 2e-3;
    EXPECT_LE(worst, allowed) << dtype_name(t);
    if (g_comms->world_rank() == 0) {
      std::printf(
          "fill_normal %s: %lld of %lld elements differ bitwise from the host, worst absolute "
          "difference %.3g std\n",
          std::string(dtype_name(t)).c_str(), static_cast<long long>(differ),
          static_cast<long long>(count), worst);
    }
  }
}

TEST_P(CudaBackendTest, FillNan) {
  Backend& be = backend(GetParam());
  Buf d(be, 1001 * 2);
  be.fill_nan(d.p, DType::kBFloat16, 1001);
  std::vector<float> f(1001);
  const auto bits = to_host<uint16_t>(be, d.p, 1001);
  convert_to_float(bits.data(), DType::kBFloat16, f.data(), 1001);
  for (float x : f) ASSERT_TRUE(std::isnan(x));
}

// copy on a second stream, after work on stream 0 (fork), is seen on stream 0 after a join;
// overlapping buffers are refused.
TEST_P(CudaBackendTest, CopyOnAStream) {
  Backend& be = backend(GetParam());
  constexpr int64_t kCount = (int64_t{1} << 20) + 3;  // odd: not a multiple of any vector width
  Buf src(be, kCount * 2), dst(be, kCount * 2);
  be.fill_normal(src.p, DType::kBFloat16, {kCount}, {kCount}, {0}, 99 + be.tp_rank(), 1.0f);
  be.fill_nan(dst.p, DType::kBFloat16, kCount);
  const int s = be.num_streams() > 1 ? 1 : 0;
  be.fork_streams();
  be.copy(dst.p, src.p, kCount * 2, s, "test copy");
  be.join_streams(0);
  const auto a = to_host<uint16_t>(be, src.p, kCount);
  const auto b = to_host<uint16_t>(be, dst.p, kCount);
  EXPECT_EQ(a, b);
  EXPECT_THROW(be.copy(static_cast<char*>(src.p) + 2, src.p, 64, 0, "overlap"), Error);
}

TEST_P(CudaBackendTest, ReorderMatchesApplyReorder) {
  Backend& be = backend(GetParam());
  const int tp = be.tp_size();
  for (const ReorderKind kind : {ReorderKind::kTpspLeading, ReorderKind::kDpLeading}) {
    for (const int64_t rest : {int64_t{3}, int64_t{8}}) {  // 2-byte and 16-byte copy paths
      for (const int dp : {1, 2}) {
        const Shape shape = {4, 6 * tp, rest};
        const int64_t count = num_elements(shape);
        std::vector<uint16_t> src(static_cast<size_t>(count)), want(src.size());
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 7 + 1);
        apply_reorder(kind, shape, dp, tp, src.data(), want.data(), 2);
        Buf ds(be, src.size() * 2), dd(be, src.size() * 2);
        be.copy_from_host(ds.p, src.data(), src.size() * 2);
        be.reorder(kind, shape, dp, tp, ds.p, dd.p, DType::kBFloat16, 1 % be.num_streams());
        EXPECT_EQ(to_host<uint16_t>(be, dd.p, src.size()), want)
            << (kind == ReorderKind::kTpspLeading ? "tpsp" : "dp") << " rest " << rest << " dp "
            << dp;
      }
    }
  }
}

TEST_P(CudaBackendTest, SumPartialsMatchesFp32InOrder) {
  Backend& be = backend(GetParam());
  const int64_t bias_len = 48;
  const int parts_n = 3;
  // 3000: the 8-wide vector path; 3001: the scalar one.
  for (const int64_t count : {int64_t{3000}, int64_t{3001}}) {
    for (const DType part : {DType::kBFloat16, DType::kFloat32}) {
      for (const DType out : {DType::kBFloat16, DType::kFloat32}) {
        std::vector<std::vector<unsigned char>> host(parts_n);
        std::vector<std::unique_ptr<Buf>> dev;
        std::vector<const void*> ptrs;
        std::vector<float> acc(static_cast<size_t>(count), 0.0f), tmp(static_cast<size_t>(count));
        for (int p = 0; p < parts_n; ++p) {
          std::vector<float> f(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i) {
            f[static_cast<size_t>(i)] =
                numeric::normal_value(77 + p, static_cast<uint64_t>(i), 3.0f);
          }
          host[static_cast<size_t>(p)].resize(static_cast<size_t>(count) * dtype_size(part));
          convert_from_float(f.data(), host[static_cast<size_t>(p)].data(), part, count);
          convert_to_float(host[static_cast<size_t>(p)].data(), part, tmp.data(), count);
          for (size_t i = 0; i < acc.size(); ++i) acc[i] += tmp[i];
          dev.push_back(std::make_unique<Buf>(be, host[static_cast<size_t>(p)].size()));
          be.copy_from_host(dev.back()->p, host[static_cast<size_t>(p)].data(),
                            host[static_cast<size_t>(p)].size());
          ptrs.push_back(dev.back()->p);
        }
        std::vector<float> bias_f(static_cast<size_t>(bias_len));
        for (int64_t j = 0; j < bias_len; ++j) {
          bias_f[static_cast<size_t>(j)] =
              numeric::normal_value(99, static_cast<uint64_t>(j), 1.0f);
        }
        std::vector<unsigned char> bias(static_cast<size_t>(bias_len) * dtype_size(out));
        convert_from_float(bias_f.data(), bias.data(), out, bias_len);
        convert_to_float(bias.data(), out, bias_f.data(), bias_len);
        // The sum is rounded to the output dtype before the bias is added (gemm.py: the
        // reduction in the output dtype, then output += bias).
        {
          std::vector<unsigned char> rounded(static_cast<size_t>(count) * dtype_size(out));
          convert_from_float(acc.data(), rounded.data(), out, count);
          convert_to_float(rounded.data(), out, acc.data(), count);
        }
        for (int64_t i = 0; i < count; ++i) {
          acc[static_cast<size_t>(i)] += bias_f[static_cast<size_t>(i % bias_len)];
        }
        std::vector<unsigned char> want(static_cast<size_t>(count) * dtype_size(out));
        convert_from_float(acc.data(), want.data(), out, count);
        Buf db(be, bias.size()), dout(be, want.size());
        be.copy_from_host(db.p, bias.data(), bias.size());
        be.sum_partials(ptrs, part, count, db.p, bias_len, dout.p, out, 0);
        std::vector<unsigned char> got(want.size());
        be.copy_to_host(got.data(), dout.p, got.size());
        EXPECT_EQ(got, want) << dtype_name(part) << " -> " << dtype_name(out) << ", " << count;
      }
    }
  }
}

// --- exchanges ---

// A ring all-gather that forwards what the previous step received (FIFO), repeated with new
// data every iteration and no host synchronisation, the consumer of iteration i reading the
// slots while iteration i+1's exchanges wait for it only through the documented dependency
// (join_streams, then start_exchange after stream 0). Odd chunk size on purpose.
TEST_P(CudaBackendTest, RingAllGatherWithReuse) {
  Backend& be = backend(GetParam());
  const int tp = be.tp_size();
  if (tp < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const int me = be.tp_rank();
  const int right = (me + 1) % tp, left = (me + tp - 1) % tp;
  const int64_t chunk = 100003;  // floats; 400012 bytes, not a multiple of 16
  const size_t chunk_bytes = static_cast<size_t>(chunk) * sizeof(float);
  const int iters = 24;
  const int consumer = be.num_streams() > 1 ? 1 : 0;

  auto value = [](int rank, int it, int64_t i) {
    return 1.0f + static_cast<float>((rank * 131 + it * 17 + i) % 1000) / 64.0f;
  };
  std::vector<float> staging(static_cast<size_t>(chunk * iters));
  for (int it = 0; it < iters; ++it) {
    for (int64_t i = 0; i < chunk; ++i)
      staging[static_cast<size_t>(it * chunk + i)] = value(me, it, i);
  }
  Buf src(be, staging.size() * sizeof(float)), out(be, staging.size() * sizeof(float));
  be.copy_from_host(src.p, staging.data(), staging.size() * sizeof(float));
  SymmetricBuffer ring = be.allocate_symmetric(chunk_bytes * static_cast<size_t>(tp), Group::kTp);
  char* slots = static_cast<char*>(ring.local);

  for (int it = 0; it < iters; ++it) {
    be.join_streams(0);  // the previous consumer is done with the slots before they change
    const void* mine = static_cast<const char*>(src.p) + static_cast<size_t>(it) * chunk_bytes;
    const void* one[] = {mine};
    be.sum_partials(one, DType::kFloat32, chunk, nullptr, 0,
                    slots + static_cast<size_t>(me) * chunk_bytes, DType::kFloat32, 0);
    ExchangeToken last = -1;
    for (int s = 0; s < tp - 1; ++s) {
      const int send_slot = (me - s + tp) % tp;
      const int recv_slot = (me - s - 1 + 2 * tp) % tp;
      Exchange x;
      x.src = slots + static_cast<size_t>(send_slot) * chunk_bytes;
      x.bytes = chunk_bytes;
      x.send_peer = right;
      x.send_offset = static_cast<size_t>(send_slot) * chunk_bytes;
      x.recv_peer = left;
      x.recv_offset = static_cast<size_t>(recv_slot) * chunk_bytes;
      x.dst = &ring;
      last = be.start_exchange(Group::kTp, {&x, 1}, s == 0 ? 0 : -1);
    }
    be.wait_exchange(last, consumer);
    std::vector<const void*> parts;
    for (int r = 0; r < tp; ++r) parts.push_back(slots + static_cast<size_t>(r) * chunk_bytes);
    be.sum_partials(parts, DType::kFloat32, chunk, nullptr, 0,
                    static_cast<char*>(out.p) + static_cast<size_t>(it) * chunk_bytes,
                    DType::kFloat32, consumer);
  }
  be.synchronize();
  const auto got = to_host<float>(be, out.p, staging.size());
  int64_t bad = 0;
  for (int it = 0; it < iters; ++it) {
    for (int64_t i = 0; i < chunk; ++i) {
      float want = 0.0f;
      for (int r = 0; r < tp; ++r) want += value(r, it, i);
      if (got[static_cast<size_t>(it * chunk + i)] != want && ++bad <= 5) {
        ADD_FAILURE() << "iteration " << it << " element " << i << ": got "
                      << got[static_cast<size_t>(it * chunk + i)] << ", want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  be.release_symmetric(ring);
}

// Two exchanges in one group (both directions of the ring, as aggregate mode does); with two
// ranks both go to the same peer, at different offsets.
TEST_P(CudaBackendTest, BidirectionalGroup) {
  Backend& be = backend(GetParam());
  const int tp = be.tp_size();
  if (tp < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const int me = be.tp_rank();
  const int right = (me + 1) % tp, left = (me + tp - 1) % tp;
  const size_t n = 4099;  // bytes
  std::vector<unsigned char> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = static_cast<unsigned char>(me * 37 + i);
  Buf src(be, n);
  be.copy_from_host(src.p, mine.data(), n);
  SymmetricBuffer buf = be.allocate_symmetric(2 * n * static_cast<size_t>(tp), Group::kTp);
  for (int rep = 0; rep < 10; ++rep) {
    Exchange cw, ccw;
    cw.src = src.p;
    cw.bytes = n;
    cw.send_peer = right;
    cw.send_offset = static_cast<size_t>(me) * n;  // slot = sender, first half
    cw.recv_peer = left;
    cw.recv_offset = static_cast<size_t>(left) * n;
    cw.dst = &buf;
    ccw = cw;
    ccw.send_peer = left;
    ccw.send_offset = (static_cast<size_t>(tp) + static_cast<size_t>(me)) * n;  // second half
    ccw.recv_peer = right;
    ccw.recv_offset = (static_cast<size_t>(tp) + static_cast<size_t>(right)) * n;
    const Exchange group[] = {cw, ccw};
    be.wait_exchange(be.start_exchange(Group::kTp, group, 0), 0);
  }
  be.synchronize();
  std::vector<unsigned char> got(2 * n * static_cast<size_t>(tp));
  be.copy_to_host(got.data(), buf.local, got.size());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[static_cast<size_t>(left) * n + i], static_cast<unsigned char>(left * 37 + i));
    ASSERT_EQ(got[(static_cast<size_t>(tp) + static_cast<size_t>(right)) * n + i],
              static_cast<unsigned char>(right * 37 + i));
  }
  be.release_symmetric(buf);
}

// --- reference collectives ---

TEST_P(CudaBackendTest, ReferenceCollectives) {
  Backend& be = backend(GetParam());
  const int tp = be.tp_size(), me = be.tp_rank();
  const int64_t n = 1000;
  std::vector<float> mine(static_cast<size_t>(n * tp));
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<float>(me + 1) * 0.25f + static_cast<float>(i % 7);
  Buf src(be, mine.size() * 4), dst(be, mine.size() * 4 * static_cast<size_t>(tp));
  be.copy_from_host(src.p, mine.data(), mine.size() * 4);

  be.all_gather(Group::kTp, src.p, dst.p, static_cast<size_t>(n) * 4, 0, "test all-gather");
  auto got = to_host<float>(be, dst.p, static_cast<size_t>(n * tp));
  for (int r = 0; r < tp; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[static_cast<size_t>(r * n + i)],
                static_cast<float>(r + 1) * 0.25f + static_cast<float>(i % 7));
    }
  }
  be.reduce_scatter(Group::kTp, src.p, dst.p, DType::kFloat32, n, 0, "test reduce-scatter");
  got = to_host<float>(be, dst.p, static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float want = 0.0f;
    for (int r = 0; r < tp; ++r) {
      want += static_cast<float>(r + 1) * 0.25f + static_cast<float>((me * n + i) % 7);
    }
    ASSERT_FLOAT_EQ(got[static_cast<size_t>(i)], want);
  }
  be.all_reduce(Group::kTp, src.p, DType::kFloat32, n, 0, nullptr);
  got = to_host<float>(be, src.p, static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float want = 0.0f;
    for (int r = 0; r < tp; ++r)
      want += static_cast<float>(r + 1) * 0.25f + static_cast<float>(i % 7);
    ASSERT_FLOAT_EQ(got[static_cast<size_t>(i)], want);
  }
  const double ms =
      be.time_ms([&] { be.all_reduce(Group::kTp, src.p, DType::kFloat32, n, 0, nullptr); });
  EXPECT_GT(ms, 0.0);
}

// On a shared GPU the backend must refuse NCCL (use_ce = off) with one message, before any
// NCCL call; with GPUs of their own the ranks never see it.
TEST(CudaBackendSharing, SharingRefusesNccl) {
  if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
  if (!sharing()) GTEST_SKIP() << "CGEMM_TEST_GPU_SHARING is not 1";
  if (g_comms->tp() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  OverlapOptions o;
  o.use_ce = false;
  try {
    make_cuda_backend(*g_comms, o, placement());
    FAIL() << "a shared GPU with use_ce = off was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_sharing needs the copy-engine transport"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CudaBackendTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "use_ce" : "nccl");
                         });

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // An exception on one rank must end the job (mpirun kills the others), not leave the other
  // ranks waiting in the next test's collective.
  GTEST_FLAG_SET(catch_exceptions, false);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 0;
  try {
    cgemm::g_comms = std::make_unique<cgemm::MeshComms>(MPI_COMM_WORLD, 1, size);
    rc = RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (auto& b : cgemm::g_backends) b.reset();
  cgemm::g_comms.reset();
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
