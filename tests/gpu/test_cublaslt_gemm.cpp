// CublasLtGemm against an fp64 CPU reference: every input dtype, lhs and rhs transposed or not,
// with and without bias, odd sizes, padded leading dimensions, strided batches written into a
// larger output, alpha/beta (beta 0 never reads the output, beta != 0 accumulates into it). Outputs
// are poisoned with NaN first, so a missed element (or a write outside the output region) shows.
// Autotuning (CGEMM_GEMM_AUTOTUNE): on by default, so every case also runs the timing path; the
// Autotune* cases check it times once per key, keeps beta's input intact, and is shared safely by
// threads on several streams. Skips when no GPU is visible.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/gemm/cublaslt_gemm.hpp"
#include "gemm_reference.hpp"

namespace cgemm {
namespace {

// --- host-side element conversions (the bits the device sees) ---

size_t elem_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }

void store(std::vector<unsigned char>& buf, size_t i, DType t, float v) {
  if (t == DType::kFloat32) {
    std::memcpy(buf.data() + i * 4, &v, 4);
  } else {
    const uint16_t h =
        t == DType::kBFloat16 ? numeric::float_to_bf16(v) : numeric::float_to_fp16(v);
    std::memcpy(buf.data() + i * 2, &h, 2);
  }
}

double load(const std::vector<unsigned char>& buf, size_t i, DType t) {
  if (t == DType::kFloat32) {
    float v;
    std::memcpy(&v, buf.data() + i * 4, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, buf.data() + i * 2, 2);
  return t == DType::kBFloat16 ? numeric::bf16_to_float(h) : numeric::fp16_to_float(h);
}

// Host tensor in a dtype plus its values as double (after rounding to the dtype).
struct HostTensor {
  DType dtype;
  std::vector<unsigned char> bits;
  std::vector<double> values;
  HostTensor(DType t, size_t count) : dtype(t), bits(count * elem_size(t)), values(count) {}
  void fill_normal(uint64_t seed, float std) {
    for (size_t i = 0; i < values.size(); ++i) {
      store(bits, i, dtype, numeric::normal_value(seed, i, std));
      values[i] = load(bits, i, dtype);
    }
  }
  void fill_nan() {
    for (size_t i = 0; i < values.size(); ++i) {
      store(bits, i, dtype, std::nanf(""));
      values[i] = std::nan("");
    }
  }
};

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(const HostTensor& h) {
    EXPECT_EQ(cudaMalloc(&p, h.bits.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.bits.data(), h.bits.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* at(size_t bytes) const { return static_cast<char*>(p) + bytes; }
};

// Sets an environment variable for a scope (CublasLtGemm reads CGEMM_GEMM_AUTOTUNE when built).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Why GPU tests cannot run here, or empty when they can.
std::string no_gpu_reason() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable GPU (cudaGetDeviceCount: ") + cudaGetErrorName(rc) + ")";
  }
  if (count == 0) return "no GPU visible";
  return {};
}

// One GEMM problem and where it lives in memory.
struct Case {
  DType in = DType::kBFloat16, out = DType::kBFloat16;
  int64_t m = 37, n = 53, k = 29, batch = 1;
  bool lhs_transposed = false, rhs_transposed = false, bias = false;
  int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
  int64_t rows_per_block = 0;  // rows of each lhs/out batch block in storage (>= m + row_offset)
  int64_t row_offset = 0;      // first row of the GEMM inside each block
  // A transposed lhs block is [k, rows_per_block] (the GEMM's rows are its columns, from
  // row_offset on), followed by this many unused rows before the next block.
  int64_t lhs_gap_rows = 1;
  float alpha = 1.0f, beta = 0.0f;
  uint64_t bias_seed = 33;  // calls that must not see each other's bias get different seeds
};

struct Tolerance {
  double rtol, atol;  // atol relative to sum |terms| of the element
};

Tolerance tolerance(DType out) {
  switch (out) {
    case DType::kBFloat16:
      return {0.02, 0.002};
    case DType::kFloat16:
      return {0.005, 0.0005};
    default:
      // fp32 accumulation of K products: far below 1e-5 of the magnitude; TF32 (2^-11) is not.
      return {1e-5, 1e-5};
  }
}

// One case on the device: its inputs, its NaN-poisoned output and the task, built once so that
// several calls (on several streams or threads) can each have their own buffers, and checked
// against the fp64 reference of its own values.
class Problem {
 public:
  explicit Problem(const Case& c)
      : c_(c),
        rows_(c.rows_per_block > 0 ? c.rows_per_block : c.m + c.row_offset),
        t_(make_task(c, rows_)),
        out_count_(static_cast<size_t>(c.batch * rows_ * t_.ldc)),
        lhs_(c.in, static_cast<size_t>(c.batch * t_.lhs_batch_stride)),
        rhs_(c.in, static_cast<size_t>((c.rhs_transposed ? c.n : c.k) * t_.ldb)),
        out_(c.out, out_count_),
        bias_(c.out, static_cast<size_t>(c.n)) {
    lhs_.fill_normal(11, 1.0f);
    rhs_.fill_normal(22, 1.0f);
    bias_.fill_normal(c.bias_seed, 1.0f);
    out_.fill_nan();
    // The output region gets defined values when beta reads them; gaps stay NaN.
    HostTensor c_init(c.out, out_count_);
    c_init.fill_normal(44, 1.0f);
    lhs_off_ = static_cast<size_t>(c.lhs_transposed ? c.row_offset : c.row_offset * t_.lda);
    out_off_ = static_cast<size_t>(c.row_offset * t_.ldc);
    if (c.beta != 0.0f) {
      for_region([&](size_t o) {
        std::memcpy(out_.bits.data() + o * elem_size(c.out),
                    c_init.bits.data() + o * elem_size(c.out), elem_size(c.out));
        out_.values[o] = c_init.values[o];
      });
    }
    d_lhs_ = std::make_unique<DeviceBuffer>(lhs_);
    d_rhs_ = std::make_unique<DeviceBuffer>(rhs_);
    d_out_ = std::make_unique<DeviceBuffer>(out_);
    d_bias_ = std::make_unique<DeviceBuffer>(bias_);
    t_.lhs = d_lhs_->at(lhs_off_ * elem_size(c.in));
    t_.rhs = d_rhs_->p;
    t_.out = d_out_->at(out_off_ * elem_size(c.out));
    t_.bias = c.bias ? d_bias_->p : nullptr;
  }

  const GemmTask& task() const { return t_; }
  const std::vector<double>& bias_values() const { return bias_.values; }

  // Poisons the output again, in stream order, so the next run has to write every element.
  void poison(cudaStream_t stream) {
    EXPECT_EQ(cudaMemcpyAsync(d_out_->p, out_.bits.data(), out_.bits.size(), cudaMemcpyHostToDevice,
                              stream),
              cudaSuccess);
  }

  // Waits for `stream` and checks the output region against the reference and the gaps for
  // NaN. Returns the output bits for further comparisons.
  std::vector<unsigned char> check(cudaStream_t stream) const {
    const Case& c = c_;
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    std::vector<unsigned char> got(out_.bits.size());
    EXPECT_EQ(cudaMemcpy(got.data(), d_out_->p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);

    // Reference on the same indexing, with the GEMM's operands shifted to their offsets.
    std::vector<double> lhs_v(lhs_.values.begin() + static_cast<std::ptrdiff_t>(lhs_off_),
                              lhs_.values.end());
    std::vector<double> ref(out_.values.begin() + static_cast<std::ptrdiff_t>(out_off_),
                            out_.values.end());
    std::vector<double> mag;
    test::reference_gemm(t_, lhs_v, rhs_.values, c.bias ? &bias_.values : nullptr, ref, mag);

    const Tolerance tol = tolerance(c.out);
    std::vector<bool> in_region(out_count_, false);
    int bad = 0;
    for_region([&](size_t o) {
      in_region[o] = true;
      const double g = load(got, o, c.out);
      const double r = ref[o - out_off_];
      const double err = std::abs(g - r);
      const bool ok = std::isfinite(g) &&
                      (err <= tol.rtol * std::abs(r) || err <= tol.atol * mag[o - out_off_]);
      if (!ok && ++bad <= 5) {
        ADD_FAILURE() << "element " << o << ": got " << g << ", reference " << r << " (error "
                      << err << ", magnitude " << mag[o - out_off_] << ")";
      }
    });
    EXPECT_EQ(bad, 0) << "mismatches in " << dtype_name(c.in) << " -> " << dtype_name(c.out);
    int written_outside = 0;
    for (size_t o = 0; o < out_count_; ++o) {
      if (!in_region[o] && !std::isnan(load(got, o, c.out))) ++written_outside;
    }
    EXPECT_EQ(written_outside, 0) << "elements outside the output region were written";
    return got;
  }

 private:
  static GemmTask make_task(const Case& c, int64_t rows) {
    GemmTask t;
    t.m = c.m;
    t.n = c.n;
    t.k = c.k;
    t.in_dtype = c.in;
    t.out_dtype = c.out;
    t.lda = (c.lhs_transposed ? rows : c.k) + c.lda_pad;
    t.lhs_transposed = c.lhs_transposed;
    t.ldb = (c.rhs_transposed ? c.k : c.n) + c.ldb_pad;
    t.ldc = c.n + c.ldc_pad;
    t.rhs_transposed = c.rhs_transposed;
    t.batch = c.batch;
    t.lhs_batch_stride = (c.lhs_transposed ? c.k + c.lhs_gap_rows : rows) * t.lda;
    t.out_batch_stride = rows * t.ldc;
    t.alpha = c.alpha;
    t.beta = c.beta;
    return t;
  }

  template <typename Fn>
  void for_region(Fn&& fn) const {
    for (int64_t b = 0; b < c_.batch; ++b) {
      for (int64_t i = 0; i < c_.m; ++i) {
        for (int64_t j = 0; j < c_.n; ++j) {
          fn(out_off_ + static_cast<size_t>(b * t_.out_batch_stride + i * t_.ldc + j));
        }
      }
    }
  }

  Case c_;
  int64_t rows_;
  GemmTask t_;
  size_t out_count_;
  size_t lhs_off_ = 0, out_off_ = 0;
  HostTensor lhs_, rhs_, out_, bias_;
  std::unique_ptr<DeviceBuffer> d_lhs_, d_rhs_, d_out_, d_bias_;
};

class CublasLtGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = no_gpu_reason();
    if (!why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Runs the case on the GPU (`runs` times, into the same poisoned output) and checks it
  // against the fp64 reference. Returns the output bits for further comparisons. `stream`:
  // the fixture's stream unless given.
  std::vector<unsigned char> run_and_check(const Case& c, CublasLtGemm& gemm, int runs = 1,
                                           cudaStream_t stream = nullptr) {
    if (stream == nullptr) stream = stream_;
    Problem p(c);
    for (int r = 0; r < runs; ++r) {
      if (r > 0) p.poison(stream);
      gemm.run(p.task(), stream);
    }
    return p.check(stream);
  }

  cudaStream_t stream_ = nullptr;
};

// --- every dtype combination x rhs layout x bias, at odd and at aligned sizes ---

// (in dtype, out dtype), rhs transposed, bias, odd sizes
using Combo = std::tuple<std::tuple<DType, DType>, bool, bool, bool>;

class CublasLtGemmGrid : public CublasLtGemmTest, public ::testing::WithParamInterface<Combo> {};

TEST_P(CublasLtGemmGrid, MatchesFp64Reference) {
  const auto& [dtypes, transposed, bias, odd] = GetParam();
  Case c;
  c.in = std::get<0>(dtypes);
  c.out = std::get<1>(dtypes);
  c.rhs_transposed = transposed;
  c.bias = bias;
  if (odd) {
    c.m = 37;
    c.n = 53;
    c.k = 29;
  } else {
    c.m = 64;
    c.n = 96;
    c.k = 128;
  }
  CublasLtGemm gemm("test");
  run_and_check(c, gemm);
}

std::string combo_name(const ::testing::TestParamInfo<Combo>& info) {
  const auto& [dtypes, transposed, bias, odd] = info.param;
  return std::string(dtype_name(std::get<0>(dtypes))) + "_to_" +
         std::string(dtype_name(std::get<1>(dtypes))) + (transposed ? "_TN" : "_NN") +
         (bias ? "_bias" : "_nobias") + (odd ? "_odd" : "_aligned");
}

INSTANTIATE_TEST_SUITE_P(
    AllDtypes, CublasLtGemmGrid,
    ::testing::Combine(::testing::Values(std::make_tuple(DType::kBFloat16, DType::kBFloat16),
                                         std::make_tuple(DType::kBFloat16, DType::kFloat32),
                                         std::make_tuple(DType::kFloat16, DType::kFloat16),
                                         std::make_tuple(DType::kFloat16, DType::kFloat32),
                                         std::make_tuple(DType::kFloat32, DType::kFloat32)),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool()),
    combo_name);

// --- every layout x beta x bias x batch ---

// (in dtype, out dtype), lhs transposed, rhs transposed, beta != 0, bias, batch
using LayoutCombo = std::tuple<std::tuple<DType, DType>, bool, bool, bool, bool, int64_t>;

class CublasLtGemmLayouts : public CublasLtGemmTest,
                            public ::testing::WithParamInterface<LayoutCombo> {};

// Odd sizes, padded leading dimensions; with batch > 1 each block is a strided chunk of a
// larger one (not contiguous, so it is not folded into one GEMM).
TEST_P(CublasLtGemmLayouts, MatchesFp64Reference) {
  const auto& [dtypes, lhs_t, rhs_t, beta, bias, batch] = GetParam();
  Case c;
  c.in = std::get<0>(dtypes);
  c.out = std::get<1>(dtypes);
  c.m = 37;
  c.n = 53;
  c.k = 29;
  c.lhs_transposed = lhs_t;
  c.rhs_transposed = rhs_t;
  c.lda_pad = 8;
  c.ldb_pad = 8;
  c.ldc_pad = 8;
  c.batch = batch;
  if (batch > 1) {
    c.rows_per_block = c.m + 11;
    c.row_offset = 8;
  }
  c.alpha = 0.5f;
  c.beta = beta ? -1.5f : 0.0f;
  c.bias = bias;
  CublasLtGemm gemm("test");
  run_and_check(c, gemm);
}

std::string layout_name(const ::testing::TestParamInfo<LayoutCombo>& info) {
  const auto& [dtypes, lhs_t, rhs_t, beta, bias, batch] = info.param;
  return std::string(dtype_name(std::get<0>(dtypes))) + "_to_" +
         std::string(dtype_name(std::get<1>(dtypes))) + (lhs_t ? "_T" : "_N") +
         (rhs_t ? "T" : "N") + (beta ? "_beta" : "_nobeta") + (bias ? "_bias" : "_nobias") +
         "_batch" + std::to_string(batch);
}

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, CublasLtGemmLayouts,
    ::testing::Combine(::testing::Values(std::make_tuple(DType::kBFloat16, DType::kBFloat16),
                                         std::make_tuple(DType::kBFloat16, DType::kFloat32),
                                         std::make_tuple(DType::kFloat32, DType::kFloat32)),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                       ::testing::Values<int64_t>(1, 3)),
    layout_name);

// --- placements ---

// A chunk of S/tp rows of every batch block written straight into [B, S, N]: the all-gather
// schedule's strided output (and strided lhs of the reduce-scatter schedule).
TEST_F(CublasLtGemmTest, StridedBatchIntoLargerOutput) {
  for (const bool transposed : {false, true}) {
    Case c;
    c.in = DType::kBFloat16;
    c.out = DType::kBFloat16;
    c.m = 24;
    c.n = 40;
    c.k = 72;
    c.batch = 3;
    c.rows_per_block = 96;  // S = 96, tp = 4: the chunk is rows 48..71 of each block
    c.row_offset = 48;
    c.rhs_transposed = transposed;
    c.bias = true;
    CublasLtGemm gemm("test");
    run_and_check(c, gemm);
  }
}

TEST_F(CublasLtGemmTest, StridedBatchOddSizesFp32Out) {
  Case c;
  c.in = DType::kFloat16;
  c.out = DType::kFloat32;
  c.m = 7;
  c.n = 33;
  c.k = 45;
  c.batch = 5;
  c.rows_per_block = 21;
  c.row_offset = 7;
  c.bias = true;
  CublasLtGemm gemm("test");
  run_and_check(c, gemm);
}

// Padded leading dimensions on every operand: the GEMM must neither read nor write the gaps.
TEST_F(CublasLtGemmTest, PaddedLeadingDimensions) {
  for (const bool transposed : {false, true}) {
    Case c;
    c.in = DType::kBFloat16;
    c.out = DType::kBFloat16;
    c.m = 40;
    c.n = 48;
    c.k = 64;
    c.lda_pad = 8;
    c.ldb_pad = 16;
    c.ldc_pad = 24;
    c.rhs_transposed = transposed;
    c.bias = true;
    CublasLtGemm gemm("test");
    run_and_check(c, gemm);
  }
}

// The problem text of the one cached key ("" when there is not exactly one): the shape the
// GEMM really ran, after any batch folding.
std::string only_problem(const CublasLtGemm& gemm) {
  const std::vector<GemmChoice> choices = gemm.choices();
  EXPECT_EQ(choices.size(), 1u);
  return choices.size() == 1 ? choices[0].problem : std::string();
}

// Batch blocks that follow each other row after row are folded into one taller GEMM.
TEST_F(CublasLtGemmTest, ContiguousBatchIsFolded) {
  Case c;
  c.in = DType::kBFloat16;
  c.out = DType::kFloat32;
  c.m = 16;
  c.n = 32;
  c.k = 48;
  c.batch = 4;
  c.rows_per_block = 16;
  c.bias = true;
  CublasLtGemm gemm("test");
  run_and_check(c, gemm);
  // Folded: one GEMM of 4 * 16 rows, not a batch of 4 (the output alone cannot tell).
  const std::string problem = only_problem(gemm);
  EXPECT_NE(problem.find("GEMM m=64 n=32 k=48 batch=1 ("), std::string::npos) << problem;
}

// The same with beta != 0: the folded GEMM accumulates into every block.
TEST_F(CublasLtGemmTest, ContiguousBatchIsFoldedWithBeta) {
  Case c;
  c.in = DType::kBFloat16;
  c.out = DType::kBFloat16;
  c.m = 16;
  c.n = 32;
  c.k = 48;
  c.batch = 4;
  c.rows_per_block = 16;
  c.alpha = 2.0f;
  c.beta = 0.5f;
  CublasLtGemm gemm("test");
  run_and_check(c, gemm);
  const std::string problem = only_problem(gemm);
  EXPECT_NE(problem.find("GEMM m=64 n=32 k=48 batch=1 ("), std::string::npos) << problem;
}

// A transposed lhs [k, m] whose blocks follow each other (k == m, so its batch stride equals
// m * lda) is not a taller GEMM: its m is in the columns. It must run as a batch.
TEST_F(CublasLtGemmTest, TransposedLhsContiguousBatchIsNotFolded) {
  for (const float beta : {0.0f, 1.0f}) {
    Case c;
    c.in = DType::kFloat32;
    c.out = DType::kFloat32;
    c.m = 32;
    c.n = 24;
    c.k = 32;
    c.batch = 3;
    c.rows_per_block = 32;
    c.lhs_transposed = true;
    c.lhs_gap_rows = 0;
    c.beta = beta;
    c.bias = true;
    CublasLtGemm gemm("test");
    run_and_check(c, gemm);
    const std::string problem = only_problem(gemm);
    EXPECT_NE(problem.find("GEMM m=32 n=24 k=32 batch=3 ("), std::string::npos) << problem;
  }
}

TEST_F(CublasLtGemmTest, AlphaBeta) {
  for (const DType out : {DType::kBFloat16, DType::kFloat32}) {
    Case c;
    c.in = DType::kBFloat16;
    c.out = out;
    c.m = 32;
    c.n = 64;
    c.k = 96;
    c.alpha = 0.5f;
    c.beta = 2.0f;
    c.bias = true;
    CublasLtGemm gemm("test");
    run_and_check(c, gemm);
  }
}

// The heuristic is asked once per problem; repeated runs reuse it and give identical bits.
TEST_F(CublasLtGemmTest, CachedAndDeterministic) {
  Case c;
  c.m = 128;
  c.n = 256;
  c.k = 512;
  c.bias = true;
  CublasLtGemm gemm("test");
  const auto first = run_and_check(c, gemm, 1);
  EXPECT_EQ(gemm.cached_problems(), 1u);
  const auto again = run_and_check(c, gemm, 3);
  EXPECT_EQ(gemm.cached_problems(), 1u);
  EXPECT_EQ(first, again);
}

// --- autotuning ---

// Checks the one cached key's choice; returns whether it was timed (the heuristic may offer a
// single candidate, and then there is nothing to time).
bool check_choice(const CublasLtGemm& gemm) {
  const std::vector<GemmChoice> choices = gemm.choices();
  EXPECT_EQ(choices.size(), 1u);
  if (choices.size() != 1) return false;
  const GemmChoice& ch = choices[0];
  std::cout << "  " << gemm.describe_choices();
  EXPECT_GE(ch.candidates, 1);
  EXPECT_LE(ch.candidates, gemm.candidates());
  EXPECT_GE(ch.chosen, 0);
  EXPECT_LT(ch.chosen, ch.candidates);
  EXPECT_EQ(ch.candidate_ms.size(), static_cast<size_t>(ch.candidates));
  if (ch.candidates < 2) {
    EXPECT_FALSE(ch.timed);
    EXPECT_EQ(gemm.tunings(), 0);
    return false;
  }
  EXPECT_TRUE(ch.timed) << ch.note;
  EXPECT_EQ(gemm.tunings(), 1);
  EXPECT_GT(ch.chosen_ms, 0.0);
  // The chosen one is the fastest that ran.
  for (const double ms : ch.candidate_ms) {
    if (ms >= 0) {
      EXPECT_LE(ch.chosen_ms, ms);
    }
  }
  EXPECT_EQ(ch.candidate_ms[static_cast<size_t>(ch.chosen)], ch.chosen_ms);
  return ch.timed;
}

// The first call times the candidates; later calls (same key) reuse the choice: no second
// tuning, same algorithm, identical bits, still matching the reference.
TEST_F(CublasLtGemmTest, AutotuneTimesOnceAndReusesTheChoice) {
  const ScopedEnv env("CGEMM_GEMM_AUTOTUNE", "1");
  Case c;
  c.m = 256;
  c.n = 512;
  c.k = 384;
  c.bias = true;
  CublasLtGemm gemm("test");
  EXPECT_TRUE(gemm.autotune());
  const auto first = run_and_check(c, gemm, 1);
  check_choice(gemm);
  const std::vector<GemmChoice> before = gemm.choices();
  const int tunings = gemm.tunings();
  const auto again = run_and_check(c, gemm, 3);
  EXPECT_EQ(gemm.tunings(), tunings) << "the second call tuned again";
  EXPECT_EQ(gemm.cached_problems(), 1u);
  const std::vector<GemmChoice> after = gemm.choices();
  ASSERT_EQ(after.size(), 1u);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(after[0].chosen, before[0].chosen);
  EXPECT_EQ(after[0].chosen_ms, before[0].chosen_ms);
  EXPECT_EQ(first, again);
  // A new shape is a new key: tuned once more.
  Case d = c;
  d.n = 256;
  run_and_check(d, gemm, 2);
  EXPECT_EQ(gemm.cached_problems(), 2u);
  EXPECT_LE(gemm.tunings(), tunings + 1);
}

// beta != 0 reads the output: timing must use a scratch output (with the ldc padding and batch
// stride of the real one), so the result still is alpha * A B + beta * C_old + bias.
TEST_F(CublasLtGemmTest, AutotuneWithBetaKeepsTheOutputsMeaning) {
  const ScopedEnv env("CGEMM_GEMM_AUTOTUNE", "1");
  for (const DType out : {DType::kBFloat16, DType::kFloat32}) {
    Case c;
    c.in = DType::kBFloat16;
    c.out = out;
    c.m = 48;
    c.n = 96;
    c.k = 128;
    c.batch = 3;
    c.rows_per_block = 64;
    c.row_offset = 8;
    c.ldc_pad = 16;
    c.alpha = 0.5f;
    c.beta = 1.5f;
    c.bias = true;
    CublasLtGemm gemm("test");
    run_and_check(c, gemm, 1);
    check_choice(gemm);
    const int tunings = gemm.tunings();
    run_and_check(c, gemm, 2);
    EXPECT_EQ(gemm.tunings(), tunings);
  }
}

// CGEMM_GEMM_AUTOTUNE=0: heuristic #1, nothing timed.
TEST_F(CublasLtGemmTest, AutotuneOffUsesHeuristicFirst) {
  const ScopedEnv env("CGEMM_GEMM_AUTOTUNE", "0");
  Case c;
  c.m = 256;
  c.n = 512;
  c.k = 384;
  CublasLtGemm gemm("test");
  EXPECT_FALSE(gemm.autotune());
  run_and_check(c, gemm, 2);
  EXPECT_EQ(gemm.tunings(), 0);
  const std::vector<GemmChoice> choices = gemm.choices();
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].chosen, 0);
  EXPECT_FALSE(choices[0].timed);
  EXPECT_LT(choices[0].chosen_ms, 0.0);
  EXPECT_NE(choices[0].note.find("CGEMM_GEMM_AUTOTUNE"), std::string::npos) << choices[0].note;
}

// One instance, three host threads on three streams, the same new key at once (as the runtime's
// compute streams): the key is tuned once and every stream gets the same, correct bits.
TEST_F(CublasLtGemmTest, AutotuneSharedByThreadsOnSeveralStreams) {
  const ScopedEnv env("CGEMM_GEMM_AUTOTUNE", "1");
  Case c;
  c.m = 512;
  c.n = 384;
  c.k = 256;
  c.bias = true;
  CublasLtGemm gemm("test");
  constexpr int kThreads = 3;
  std::vector<cudaStream_t> streams(kThreads, nullptr);
  for (cudaStream_t& s : streams) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    gemm.add_stream(s);
  }
  std::vector<std::vector<unsigned char>> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      if (cudaSetDevice(0) != cudaSuccess) {
        ADD_FAILURE() << "cudaSetDevice in thread " << i;
        return;
      }
      try {
        results[static_cast<size_t>(i)] =
            run_and_check(c, gemm, 2, streams[static_cast<size_t>(i)]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "thread " << i << ": " << e.what();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
  EXPECT_EQ(gemm.cached_problems(), 1u);
  check_choice(gemm);  // one key, tuned at most once
  for (int i = 1; i < kThreads; ++i) EXPECT_EQ(results[static_cast<size_t>(i)], results[0]);
}

TEST_F(CublasLtGemmTest, RejectsInvalidTasks) {
  CublasLtGemm gemm("test");
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 1 << 16), cudaSuccess);
  GemmTask t;
  t.m = 8;
  t.n = 8;
  t.k = 8;
  t.lhs = d;
  t.rhs = d;
  t.out = d;
  t.lda = 8;
  t.ldb = 8;
  t.ldc = 4;  // < n
  try {
    gemm.run(t, stream_);
    ADD_FAILURE() << "ldc < n was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m=8 n=8 k=8"), std::string::npos) << e.what();
  }
  t.ldc = 8;
  t.in_dtype = DType::kFloat8E4M3;
  EXPECT_THROW(gemm.run(t, stream_), Error);
  t.in_dtype = DType::kFloat32;
  t.out_dtype = DType::kBFloat16;  // fp32 in needs fp32 out
  EXPECT_THROW(gemm.run(t, stream_), Error);
  t.out_dtype = DType::kFloat32;
  t.m = 16;
  t.lda = 8;  // >= k but < m, the row length of a transposed lhs [k, m]
  t.lhs_transposed = true;
  try {
    gemm.run(t, stream_);
    ADD_FAILURE() << "a transposed lhs with lda < m was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lda < m"), std::string::npos) << e.what();
  }
  EXPECT_EQ(gemm.cached_problems(), 0u);
  cudaFree(d);
}

// --- the call's own pointers ---

// The bias pointer is the call's, not the cached key's: two calls of one key (same shapes and
// alignments) with biases of different values each get their own, whether back to back on one
// stream or at once from two threads on two streams. A descriptor shared between calls would
// give the second call the first one's bias (or, with threads, either one's).
TEST_F(CublasLtGemmTest, EachCallUsesItsOwnBias) {
  Case a;
  a.m = 64;
  a.n = 96;
  a.k = 64;
  a.bias = true;
  Case b = a;
  b.bias_seed = 133;
  CublasLtGemm gemm("test");
  {
    Problem pa(a), pb(b);
    ASSERT_NE(pa.bias_values(), pb.bias_values());
    gemm.run(pa.task(), stream_);
    gemm.run(pb.task(), stream_);
    gemm.run(pa.task(), stream_);  // and back: a stale pointer from pb's call would show here
    pa.check(stream_);
    pb.check(stream_);
    EXPECT_EQ(gemm.cached_problems(), 1u) << "the two calls were not one key";
  }

  constexpr int kThreads = 2;
  constexpr int kRounds = 20;
  std::vector<cudaStream_t> streams(kThreads, nullptr);
  for (cudaStream_t& s : streams) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    gemm.add_stream(s);
  }
  {
    Problem pa(a), pb(b);
    std::vector<Problem*> problems = {&pa, &pb};
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        // Both threads enqueue at the same time, round after round; every round is checked,
        // since a later correct round would overwrite a crossed one.
        started.fetch_add(1);
        while (started.load() < kThreads) {
        }
        if (cudaSetDevice(0) != cudaSuccess) {
          ADD_FAILURE() << "cudaSetDevice in thread " << i;
          return;
        }
        Problem& p = *problems[static_cast<size_t>(i)];
        const cudaStream_t s = streams[static_cast<size_t>(i)];
        try {
          for (int r = 0; r < kRounds; ++r) {
            p.poison(s);
            gemm.run(p.task(), s);
            p.check(s);
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << "thread " << i << ": " << e.what();
        }
      });
    }
    for (std::thread& th : threads) th.join();
  }
  for (cudaStream_t s : streams) cudaStreamDestroy(s);
  EXPECT_EQ(gemm.cached_problems(), 1u) << "the threads' calls were not one key";
  // The pointer went through the matmul descriptor (the fused epilogue), not the fallback
  // kernel, which takes it as an argument and so would pass whatever the descriptor did.
  const std::vector<GemmChoice> choices = gemm.choices();
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_TRUE(choices[0].fused_bias) << choices[0].problem;
}

// choices() says whether the bias was fused into the GEMM's epilogue. bf16 in and out with a
// bf16 bias is CUBLASLT_EPILOGUE_BIAS's plainest case, at aligned sizes: the fallback kernel
// there would mean the epilogue is never asked for. Without a bias nothing is fused.
TEST_F(CublasLtGemmTest, ReportsWhetherTheBiasWasFused) {
  Case c;
  c.in = DType::kBFloat16;
  c.out = DType::kBFloat16;
  c.m = 64;
  c.n = 96;
  c.k = 128;
  for (const bool bias : {true, false}) {
    c.bias = bias;
    CublasLtGemm gemm("test");
    run_and_check(c, gemm);
    const std::vector<GemmChoice> choices = gemm.choices();
    ASSERT_EQ(choices.size(), 1u);
    EXPECT_EQ(choices[0].fused_bias, bias) << choices[0].problem;
  }
}

}  // namespace
}  // namespace cgemm
