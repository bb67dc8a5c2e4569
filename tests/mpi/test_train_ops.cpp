// TrainOps (runtime/include/cgemm/runtime/train_ops.hpp) on the CPU backend and, where every
// rank sees a GPU, on the CUDA backend: each op against an fp64 reference computed here from
// the inputs as the backend holds them, for fp32, bf16 and fp16, on a length that takes the
// 16-byte vector path (a multiple of 8, aligned) and one that does not (odd, one element off
// alignment). Fresh random inputs every run; outputs poisoned with NaN first. Bounds: the
// output's rounding (half an ulp of its dtype) plus the kernels' fp32 arithmetic.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/train_ops.hpp"

namespace cgemm {
namespace {

std::unique_ptr<MeshComms> g_comms;
std::unique_ptr<Backend> g_cpu, g_cuda;
uint64_t g_seed = 0;

bool all_have_gpu() {
  int ok = cuda_backend_available() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
}

Backend& backend(const std::string& kind) {
  if (kind == "cpu") {
    if (!g_cpu) g_cpu = make_cpu_backend(*g_comms, OverlapOptions{});
    return *g_cpu;
  }
  if (!g_cuda) {
    const int gpus = std::max(cuda_device_count(), 1);
    CudaPlacement p;
    p.device = g_comms->local_rank() % gpus;
    p.gpu_sharing = g_comms->local_size() > gpus;
    p.ranks_per_gpu = (g_comms->local_size() + gpus - 1) / gpus;
    g_cuda = make_cuda_backend(*g_comms, OverlapOptions{}, p);
  }
  return *g_cuda;
}

// `n` elements of `t` in backend memory, plus `skew` elements in front (skew 1 puts the data
// off 16-byte alignment, so the kernels take their one-element path).
struct Buf {
  Backend& be;
  DType t;
  int64_t n, skew;
  void* base;
  Buf(Backend& b, DType dt, int64_t count, int64_t sk)
      : be(b), t(dt), n(count), skew(sk), base(b.allocate(bytes(count + sk))) {
    be.fill_nan(base, t, n + skew);
  }
  ~Buf() { be.release(base); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  size_t bytes(int64_t k) const { return static_cast<size_t>(k) * dtype_size(t); }
  void* p() const { return static_cast<char*>(base) + bytes(skew); }
  float* f() const { return static_cast<float*>(p()); }
  void normal(uint64_t seed, float std) { be.fill_normal(p(), t, {n}, {n}, {0}, seed, std); }
  std::vector<float> host() const {
    std::vector<char> raw(bytes(n));
    be.copy_to_host(raw.data(), p(), raw.size());
    std::vector<float> out(static_cast<size_t>(n));
    convert_to_float(raw.data(), t, out.data(), n);
    return out;
  }
  void set(const std::vector<float>& v) {
    std::vector<char> raw(bytes(n));
    convert_from_float(v.data(), raw.data(), t, n);
    be.copy_from_host(p(), raw.data(), raw.size());
  }
};

// Half an ulp of t relative, and the smallest normal's order as an absolute floor.
double rounding(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return std::ldexp(1.0, -8);
    case DType::kFloat16:
      return std::ldexp(1.0, -11);
    default:
      return std::ldexp(1.0, -23);
  }
}
// The kernels compute in fp32 (erfc, exp: a few ulp): added to the output's rounding.
constexpr double kFp32Math = 4e-7;
// Below t's normal range the rounding is absolute: half the smallest subnormal (fp16's 2^-24;
// fp32 and bf16 share fp32's range, where the values here never go).
double floor_of(DType t) { return t == DType::kFloat16 ? std::ldexp(1.0, -25) : 1e-37; }

// `slack[i]` (empty: none) is an absolute allowance for element i on top of the rounding.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, DType t,
                  const char* what, const std::vector<double>& slack = {}) {
  ASSERT_EQ(got.size(), want.size());
  const double rel = rounding(t) + kFp32Math;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << " [" << i << "] left unwritten (NaN)";
    const double err = std::fabs(got[i] - want[i]);
    const double bound = rel * std::fabs(want[i]) + floor_of(t) + (slack.empty() ? 0 : slack[i]);
    ASSERT_LE(err, bound) << what << " [" << i << "]: " << got[i] << " against " << want[i];
  }
}

// The kernels' fp32 arguments: erfc(-z / sqrt 2) and exp(-z^2 / 2) read an argument rounded to
// fp32 (2 ulp: z times 1/sqrt 2, z times z), which moves Phi by phi(z) |z| eps and the exp by
// z^2 eps relative. Absolute, so it also covers GELU' crossing zero near z = -0.75.
constexpr double kArgEps = 2.0 * 5.96e-8;
double phi64(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.14159265358979323846); }
double gelu_slack(double z) { return kArgEps * z * z * phi64(z); }
// GELU'(z) = Phi(z) + z phi(z) also sums two terms of opposite signs for z < 0, each rounded in
// fp32: near its zero (z = -0.75, terms of 0.23) that is absolute, not relative (2e-6 relative
// seen on the H200 at GELU' = -0.0077).
double gelu_grad_slack(double z) {
  const double a = std::fabs(z);
  const double terms = 0.5 * std::erfc(-z / std::sqrt(2.0)) + a * phi64(z);
  return kArgEps * (a * phi64(z) + a * a * a * phi64(z)) + kFp32Math * terms;
}

// Phi by erfc: 1 + erf cancels for negative z even in fp64 (2e-6 relative at z = -6.6).
double gelu64(double z) { return 0.5 * z * std::erfc(-z / std::sqrt(2.0)); }
double gelu_grad64(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0)) +
         z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.14159265358979323846);
}

struct Case {
  std::string backend;
  DType t;
  int64_t n;
  int64_t skew;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return c.backend + "_" + std::string(dtype_name(c.t)) + "_n" + std::to_string(c.n) + "_skew" +
         std::to_string(c.skew);
}

class TrainOpsTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().backend == "cuda" && !all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
    be_ = &backend(GetParam().backend);
    ops_ = TrainOps::for_backend(*be_);
  }
  Backend& be() { return *be_; }
  uint64_t seed(uint64_t k) const { return g_seed * 16 + k; }

  Backend* be_ = nullptr;
  std::unique_ptr<TrainOps> ops_;
};

TEST_P(TrainOpsTest, GeluAndItsGradient) {
  const auto [kind, t, n, skew] = GetParam();
  Buf pre(be(), t, n, skew), h(be(), t, n, skew), dh(be(), t, n, skew), dpre(be(), t, n, skew);
  pre.normal(seed(1), 2.0f);
  dh.normal(seed(2), 1.0f);
  ops_->gelu(pre.p(), h.p(), t, n);
  ops_->gelu_backward(dh.p(), pre.p(), dpre.p(), t, n);
  const std::vector<float> z = pre.host(), g = dh.host();
  std::vector<double> want_h(z.size()), want_d(z.size()), slack_h(z.size()), slack_d(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    want_h[i] = gelu64(z[i]);
    want_d[i] = g[i] * gelu_grad64(z[i]);
    slack_h[i] = gelu_slack(z[i]);
    slack_d[i] = std::fabs(g[i]) * gelu_grad_slack(z[i]);
  }
  expect_close(h.host(), want_h, t, "gelu", slack_h);
  expect_close(dpre.host(), want_d, t, "gelu_backward", slack_d);
  // In place, as the header allows.
  ops_->gelu(pre.p(), pre.p(), t, n);
  expect_close(pre.host(), want_h, t, "gelu in place", slack_h);
}

TEST_P(TrainOpsTest, ResidualTargetAndSquaredError) {
  const auto [kind, t, n, skew] = GetParam();
  Buf out(be(), t, n, skew), x(be(), t, n, skew), teacher(be(), t, n, skew), dy(be(), t, n, skew);
  Buf target(be(), DType::kFloat32, n, skew);
  out.normal(seed(3), 1.0f);
  x.normal(seed(4), 1.0f);
  teacher.normal(seed(5), 1.0f);
  ops_->add_to_f32(teacher.p(), x.p(), t, target.f(), n);
  const std::vector<float> o = out.host(), xv = x.host(), tv = teacher.host();
  const std::vector<float> tgt = target.host();
  for (size_t i = 0; i < tgt.size(); ++i) {
    ASSERT_EQ(tgt[i], tv[i] + xv[i]) << i;  // one fp32 addition of the two inputs
  }
  const double scale = 2.0 / 1000.0;
  const double sum = ops_->squared_error(out.p(), x.p(), target.f(), dy.p(), t, n, scale);
  double want = 0.0;
  std::vector<double> want_dy(o.size());
  for (size_t i = 0; i < o.size(); ++i) {
    const double d = static_cast<double>(o[i]) + xv[i] - tgt[i];
    want += d * d;
    want_dy[i] = d * scale;
  }
  EXPECT_NEAR(sum, want, 1e-12 * want);
  expect_close(dy.host(), want_dy, t, "dL/dy");
  // The sum's order is fixed: the same bits again.
  EXPECT_EQ(ops_->squared_error(out.p(), x.p(), target.f(), dy.p(), t, n, scale), sum);
}

TEST_P(TrainOpsTest, SgdAndAdamAgainstFp64) {
  const auto [kind, t, n, skew] = GetParam();
  for (const DType grad_t : {t, DType::kFloat32}) {
    for (const auto k : {OptimizerStep::Kind::kSgd, OptimizerStep::Kind::kAdam}) {
      SCOPED_TRACE(std::string(k == OptimizerStep::Kind::kSgd ? "sgd" : "adam") + ", grad " +
                   std::string(dtype_name(grad_t)));
      Buf master(be(), DType::kFloat32, n, skew), m(be(), DType::kFloat32, n, skew),
          v(be(), DType::kFloat32, n, skew), grad(be(), grad_t, n, skew), value(be(), t, n, skew);
      master.normal(seed(6), 0.5f);
      const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
      m.set(zeros);
      v.set(zeros);
      std::vector<double> w(static_cast<size_t>(n)), mm(w.size(), 0.0), vv(w.size(), 0.0);
      const std::vector<float> w0 = master.host();
      std::copy(w0.begin(), w0.end(), w.begin());
      OptimizerStep s;
      s.kind = k;
      s.master = master.f();
      s.m = m.f();
      s.v = v.f();
      s.grad = grad.p();
      s.grad_dtype = grad_t;
      s.value = value.p();
      s.value_dtype = t;
      s.n = n;
      s.lr = 0.01;
      for (int step = 1; step <= 3; ++step) {
        grad.normal(seed(10 + step), 1.0f);
        s.step = step;
        ops_->optimizer_step(s);
        const std::vector<float> g = grad.host();
        const double c1 = 1.0 - std::pow(s.beta1, step), c2 = 1.0 - std::pow(s.beta2, step);
        for (size_t i = 0; i < w.size(); ++i) {
          if (k == OptimizerStep::Kind::kSgd) {
            w[i] -= s.lr * g[i];
          } else {
            mm[i] = s.beta1 * mm[i] + (1 - s.beta1) * g[i];
            vv[i] = s.beta2 * vv[i] + (1 - s.beta2) * g[i] * g[i];
            w[i] -= s.lr * (mm[i] / c1) / (std::sqrt(vv[i] / c2) + s.eps);
          }
        }
      }
      // fp32 master: its own rounding per step plus the kernels' fp32 update (about lr x
      // fp32's epsilon per step); the value is the master rounded to t.
      const std::vector<float> got = master.host(), got_value = value.host();
      for (size_t i = 0; i < w.size(); ++i) {
        ASSERT_NEAR(got[i], w[i], 4e-7 * (std::fabs(w[i]) + 3 * s.lr)) << i;
      }
      std::vector<double> want_value(got.begin(), got.end());
      expect_close(got_value, want_value, t, "value");
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* b : {"cpu", "cuda"}) {
    for (const DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      out.push_back({b, t, 4096, 0});  // 16-byte vectors
      out.push_back({b, t, 1001, 1});  // one element at a time, off alignment
    }
  }
  return out;
}
INSTANTIATE_TEST_SUITE_P(Backends, TrainOpsTest, testing::ValuesIn(cases()), case_name);

TEST(TrainOpsErrors, RefusedArgumentsNameTheOp) {
  Backend& be = backend("cpu");
  auto ops = TrainOps::for_backend(be);
  float buf[8] = {};
  try {
    ops->gelu(buf, buf, DType::kFloat8E4M3, 8);
    FAIL() << "fp8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("TrainOps::gelu: dtype"), std::string::npos) << e.what();
  }
  try {
    ops->gelu_backward(buf, buf, buf, DType::kFloat32, -1);
    FAIL() << "a negative count accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("negative element count -1"), std::string::npos)
        << e.what();
  }
  OptimizerStep s;
  s.master = buf;
  s.grad = buf;
  s.value = buf;
  s.n = 8;
  s.kind = OptimizerStep::Kind::kAdam;
  try {
    ops->optimizer_step(s);
    FAIL() << "Adam without its moments accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moment buffers"), std::string::npos) << e.what();
  }
  s.m = buf;
  s.v = buf;
  s.step = 0;
  try {
    ops->optimizer_step(s);
    FAIL() << "Adam step 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("counts from 1, got 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(catch_exceptions, false);
  uint64_t seed = std::random_device{}();
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  cgemm::g_seed = seed;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
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
  cgemm::g_cpu.reset();
  cgemm::g_cuda.reset();
  cgemm::g_comms.reset();
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
