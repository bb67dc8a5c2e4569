// CublasLtGemm with FP8 inputs (per-tensor scaling) against an fp64 CPU reference of the
// dequantized inputs: inputs of standard deviation 1 quantized on the host with float8.hpp's
// casts and scale = fp8_max / amax, so scale_inv is far from 1 and a scale pointer that is
// missing, or read from the wrong operand's value, fails by orders of magnitude. The seed's
// pairs (e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3), the Hopper layout (lhs [m, k], rhs stored
// [n, k]), bf16 / fp16 / fp32 outputs with the bias epilogue, fast and split accumulation,
// strided batches into a larger output, a null scale_inv (= 1), the autotuner on FP8 keys, and
// the one-line refusals. Skips when no GPU is visible.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/float8.hpp"
#include "cgemm/gemm/cublaslt_gemm.hpp"
#include "gemm_reference.hpp"

namespace cgemm {
namespace {

std::string no_gpu_reason() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable GPU (cudaGetDeviceCount: ") + cudaGetErrorName(rc) + ")";
  }
  return count == 0 ? "no GPU visible" : "";
}

struct DeviceBytes {
  void* p = nullptr;
  explicit DeviceBytes(const void* host, size_t bytes) {
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 1)), cudaSuccess);
    if (host != nullptr) {
      EXPECT_EQ(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  ~DeviceBytes() { cudaFree(p); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  char* at(size_t bytes) const { return static_cast<char*>(p) + bytes; }
};

// A quantized operand: `count` normal(0, std) values cast to `fmt` with scale fp8_max / amax
// (scale 1 when `unit_scale`), and the dequantized values the reference multiplies.
struct QuantizedHost {
  std::vector<uint8_t> codes;
  std::vector<double> values;  // decode(code) * scale_inv
  float scale_inv = 1.0f;
  QuantizedHost(DType fmt, size_t count, uint64_t seed, float std, bool unit_scale)
      : codes(count), values(count) {
    std::vector<float> x(count);
    float amax = 0.0f;
    for (size_t i = 0; i < count; ++i) {
      x[i] = numeric::normal_value(seed, i, std);
      amax = std::max(amax, std::abs(x[i]));
    }
    const float scale = unit_scale ? 1.0f : numeric::fp8_max(fmt) / amax;
    scale_inv = 1.0f / scale;
    for (size_t i = 0; i < count; ++i) {
      codes[i] = numeric::float_to_narrow(x[i] * scale, fmt);
      values[i] = static_cast<double>(numeric::narrow_to_float(codes[i], fmt)) * scale_inv;
    }
  }
};

struct Fp8Case {
  DType lhs = DType::kFloat8E4M3, rhs = DType::kFloat8E4M3, out = DType::kBFloat16;
  int64_t m = 64, n = 96, k = 128, batch = 1;
  int64_t rows_per_block = 0, row_offset = 0;  // batch > 1: lhs/out blocks inside larger ones
  int64_t lda_pad = 0, ldb_pad = 0, ldc_pad = 0;
  bool bias = true, fast = true, unit_scale = false;
  int64_t rhs_scale_offset = 16;  // bytes into the scales' buffer (lhs's is at 0)
  float alpha = 1.0f, beta = 0.0f;
  std::string name;
};

// Test names and failure messages show the case's name, not its bytes.
void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.name; }

size_t out_size(DType t) { return dtype_size(t); }

// Runs the case on `gemm` and checks every output element against the fp64 reference of the
// dequantized operands (and the gaps of the output for the NaN poison).
void run_and_check(const Fp8Case& c, CublasLtGemm& gemm, cudaStream_t stream) {
  SCOPED_TRACE(c.name);
  const int64_t rows = c.rows_per_block > 0 ? c.rows_per_block : c.m + c.row_offset;
  GemmTask t;
  t.m = c.m;
  t.n = c.n;
  t.k = c.k;
  t.in_dtype = c.lhs;
  t.rhs_dtype = c.rhs;
  t.out_dtype = c.out;
  t.lda = c.k + c.lda_pad;
  t.rhs_transposed = true;  // stored [n, k]
  t.ldb = c.k + c.ldb_pad;
  t.ldc = c.n + c.ldc_pad;
  t.batch = c.batch;
  t.lhs_batch_stride = rows * t.lda;
  t.out_batch_stride = rows * t.ldc;
  t.alpha = c.alpha;
  t.beta = c.beta;
  t.fast_accumulation = c.fast;

  const auto lhs_count = static_cast<size_t>(c.batch * rows * t.lda);
  const auto rhs_count = static_cast<size_t>(c.n * t.ldb);
  const auto out_count = static_cast<size_t>(c.batch * rows * t.ldc);
  const QuantizedHost lhs(c.lhs, lhs_count, 11, 1.0f, c.unit_scale);
  const QuantizedHost rhs(c.rhs, rhs_count, 22, 1.0f, c.unit_scale);
  std::vector<float> bias_f(static_cast<size_t>(c.n)), out_f(out_count);
  for (size_t j = 0; j < bias_f.size(); ++j) bias_f[j] = numeric::normal_value(33, j, 1.0f);
  for (size_t i = 0; i < out_f.size(); ++i) out_f[i] = numeric::normal_value(44, i, 1.0f);
  const size_t es = out_size(c.out);
  std::vector<unsigned char> bias_bits(bias_f.size() * es), out_bits(out_count * es);
  convert_from_float(bias_f.data(), bias_bits.data(), c.out, c.n);
  convert_to_float(bias_bits.data(), c.out, bias_f.data(), c.n);
  // The output region holds defined values when beta reads it; everything else is NaN.
  const size_t lhs_off = static_cast<size_t>(c.row_offset * t.lda);
  const size_t out_off = static_cast<size_t>(c.row_offset * t.ldc);
  std::vector<bool> in_region(out_count, false);
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        in_region[out_off + static_cast<size_t>(b * t.out_batch_stride + i * t.ldc + j)] = true;
      }
    }
  }
  for (size_t o = 0; o < out_count; ++o) {
    if (!(in_region[o] && c.beta != 0.0f)) out_f[o] = std::nanf("");
  }
  convert_from_float(out_f.data(), out_bits.data(), c.out, static_cast<int64_t>(out_count));
  convert_to_float(out_bits.data(), c.out, out_f.data(), static_cast<int64_t>(out_count));

  DeviceBytes d_lhs(lhs.codes.data(), lhs_count), d_rhs(rhs.codes.data(), rhs_count),
      d_out(out_bits.data(), out_bits.size()), d_bias(bias_bits.data(), bias_bits.size()),
      d_scales(nullptr, 32);
  const float scales[2] = {lhs.scale_inv, rhs.scale_inv};
  ASSERT_EQ(cudaMemcpy(d_scales.p, &scales[0], 4, cudaMemcpyHostToDevice), cudaSuccess);
  const auto rso = static_cast<size_t>(c.rhs_scale_offset);
  ASSERT_EQ(cudaMemcpy(d_scales.at(rso), &scales[1], 4, cudaMemcpyHostToDevice), cudaSuccess);
  t.lhs = d_lhs.at(lhs_off);
  t.rhs = d_rhs.p;
  t.out = d_out.at(out_off * es);
  t.bias = c.bias ? d_bias.p : nullptr;
  if (!c.unit_scale) {
    t.lhs_scale_inv = reinterpret_cast<const float*>(d_scales.at(0));
    t.rhs_scale_inv = reinterpret_cast<const float*>(d_scales.at(rso));
  }
  gemm.run(t, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  std::vector<unsigned char> got_bits(out_bits.size());
  ASSERT_EQ(cudaMemcpy(got_bits.data(), d_out.p, got_bits.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::vector<float> got(out_count);
  convert_to_float(got_bits.data(), c.out, got.data(), static_cast<int64_t>(out_count));

  std::vector<double> lhs_v(lhs.values.begin() + static_cast<std::ptrdiff_t>(lhs_off),
                            lhs.values.end());
  std::vector<double> ref(out_count - out_off), mag;
  for (size_t o = out_off; o < out_count; ++o) ref[o - out_off] = out_f[o];
  std::vector<double> bias_v(bias_f.begin(), bias_f.end());
  test::reference_gemm(t, lhs_v, rhs.values, c.bias ? &bias_v : nullptr, ref, mag);

  // The products of FP8 values are exact in fp32; what is left is the fp32 (or, with fast
  // accumulation, Hopper's narrower) accumulation over k and the rounding to the output dtype.
  const double rtol = c.out == DType::kFloat32 ? 1e-3 : c.out == DType::kFloat16 ? 4e-3 : 1.6e-2;
  const double atol = 4e-3;  // of sum |terms|
  int bad = 0, outside = 0;
  for (size_t o = 0; o < out_count; ++o) {
    if (!in_region[o]) {
      if (!std::isnan(got[o])) ++outside;
      continue;
    }
    const double g = got[o], r = ref[o - out_off], err = std::abs(g - r);
    const bool ok =
        std::isfinite(g) && (err <= rtol * std::abs(r) || err <= atol * mag[o - out_off]);
    if (!ok && ++bad <= 5) {
      ADD_FAILURE() << "element " << o << ": got " << g << ", reference " << r << " (error " << err
                    << ", magnitude " << mag[o - out_off] << ")";
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(outside, 0) << "elements outside the output region were written";
}

class CublasLtFp8Test : public ::testing::Test {
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
  cudaStream_t stream_ = nullptr;
};

class CublasLtFp8Grid : public CublasLtFp8Test, public ::testing::WithParamInterface<Fp8Case> {};

TEST_P(CublasLtFp8Grid, MatchesFp64ReferenceOfDequantizedInputs) {
  CublasLtGemm gemm("test");
  run_and_check(GetParam(), gemm, stream_);
  // Timed by the autotuner (on by default) unless the heuristic offered one candidate.
  const std::vector<GemmChoice> choices = gemm.choices();
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_TRUE(choices[0].timed || choices[0].candidates == 1) << choices[0].note;
  std::printf("  %s", gemm.describe_choices().c_str());
}

Fp8Case make(const char* name, DType lhs, DType rhs, DType out) {
  Fp8Case c;
  c.name = name;
  c.lhs = lhs;
  c.rhs = rhs;
  c.out = out;
  return c;
}

std::vector<Fp8Case> cases() {
  constexpr DType e4 = DType::kFloat8E4M3, e5 = DType::kFloat8E5M2;
  std::vector<Fp8Case> v;
  v.push_back(make("e4m3_e4m3_bf16_bias", e4, e4, DType::kBFloat16));
  Fp8Case split = make("e4m3_e4m3_bf16_split_accumulation", e4, e4, DType::kBFloat16);
  split.fast = false;
  split.bias = false;
  v.push_back(split);
  Fp8Case c = make("e4m3_e5m2_fp32_bias_odd_m", e4, e5, DType::kFloat32);
  c.m = 37;
  c.n = 48;
  c.k = 64;
  v.push_back(c);
  // Rows that are not a multiple of 16 (a grouped GEMM's groups have any size).
  c = make("e4m3_e4m3_bf16_m24", e4, e4, DType::kBFloat16);
  c.m = 24;
  c.n = 32;
  c.k = 64;
  c.bias = false;
  v.push_back(c);
  c = make("e5m2_e4m3_fp16_bias", e5, e4, DType::kFloat16);
  c.m = 40;
  c.n = 64;
  c.k = 256;
  v.push_back(c);
  // A chunk of rows of every batch block (as the all-gather schedule writes), padded rows.
  c = make("e4m3_e4m3_bf16_strided_batch", e4, e4, DType::kBFloat16);
  c.m = 32;
  c.n = 64;
  c.k = 128;
  c.batch = 3;
  c.rows_per_block = 80;
  c.row_offset = 16;
  c.lda_pad = 16;
  c.ldb_pad = 32;
  c.ldc_pad = 8;
  c.alpha = 0.5f;
  v.push_back(c);
  c = make("e4m3_e5m2_bf16_strided_batch_split", e4, e5, DType::kBFloat16);
  c.m = 48;
  c.n = 32;
  c.k = 96;
  c.batch = 2;
  c.rows_per_block = 64;
  c.row_offset = 8;
  c.fast = false;
  v.push_back(c);
  // No scale_inv pointers: 1 each (the values are cast unscaled).
  c = make("e4m3_e4m3_bf16_null_scale_inv", e4, e4, DType::kBFloat16);
  c.unit_scale = true;
  v.push_back(c);
  // A larger one, for the tuner's many candidates.
  c = make("e4m3_e4m3_bf16_512x1024x768", e4, e4, DType::kBFloat16);
  c.m = 512;
  c.n = 1024;
  c.k = 768;
  v.push_back(c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fp8, CublasLtFp8Grid, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Fp8Case>& info) {
                           return info.param.name;
                         });

// beta != 0 reads the output in its dtype (C = D, bf16), apart so that a cuBLASLt refusal of
// it shows under its own name.
TEST_F(CublasLtFp8Test, WithBetaAccumulatesIntoTheOutput) {
  Fp8Case c = make("e4m3_e4m3_bf16_beta", DType::kFloat8E4M3, DType::kFloat8E4M3, DType::kBFloat16);
  c.beta = 1.0f;
  c.alpha = 2.0f;
  CublasLtGemm gemm("test");
  run_and_check(c, gemm, stream_);
}

// Why the grouped GEMM copies each group's scale_inv to a 16-byte slot (grouped_plan.hpp):
// cuBLASLt refuses a scale pointer at 4 bytes past an aligned one (group 1's of a [G] array).
TEST_F(CublasLtFp8Test, RefusesAScalePointerThatIsNot16ByteAligned) {
  Fp8Case c = make("e4m3_e4m3_bf16_rhs_scale_at_4", DType::kFloat8E4M3, DType::kFloat8E4M3,
                   DType::kBFloat16);
  c.rhs_scale_offset = 4;
  CublasLtGemm gemm("test");
  try {
    run_and_check(c, gemm, stream_);
    ADD_FAILURE() << "cuBLASLt ran an FP8 GEMM with its rhs scale pointer at 4 bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos)
        << e.what();
  }
}

// Whatever changes the matmul descriptor is in the key: fast accumulation and the rhs dtype
// split keys of the same shapes; the same task again reuses its key.
TEST_F(CublasLtFp8Test, KeyHoldsAccumulationAndBothDtypes) {
  CublasLtGemm gemm("test");
  Fp8Case c = make("key", DType::kFloat8E4M3, DType::kFloat8E4M3, DType::kBFloat16);
  run_and_check(c, gemm, stream_);
  run_and_check(c, gemm, stream_);
  EXPECT_EQ(gemm.cached_problems(), 1u);
  c.fast = false;
  run_and_check(c, gemm, stream_);
  EXPECT_EQ(gemm.cached_problems(), 2u);
  c.rhs = DType::kFloat8E5M2;
  run_and_check(c, gemm, stream_);
  EXPECT_EQ(gemm.cached_problems(), 3u);
  EXPECT_LE(gemm.tunings(), 3);
}

TEST_F(CublasLtFp8Test, RefusesWhatCublasLtCannotRun) {
  CublasLtGemm gemm("test");
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  DeviceBytes d(nullptr, 1 << 16);
  const auto base = [&] {
    GemmTask t;
    t.m = 16;
    t.n = 16;
    t.k = 32;
    t.in_dtype = DType::kFloat8E4M3;
    t.rhs_dtype = DType::kFloat8E4M3;
    t.lhs = t.rhs = t.out = d.p;
    t.lda = 32;
    t.ldb = 32;
    t.ldc = 16;
    t.rhs_transposed = true;
    return t;
  };
  const auto refused = [&](const GemmTask& t, const std::string& words) {
    try {
      gemm.run(t, stream_);
      ADD_FAILURE() << "accepted; expected: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  GemmTask t = base();
  t.in_dtype = DType::kFloat8E5M2;
  t.rhs_dtype = DType::kFloat8E5M2;
  refused(t, "incompatible data types: float8_e5m2 x float8_e5m2");
  t = base();
  t.in_dtype = DType::kBFloat16;
  refused(t, "incompatible data types: bfloat16 x float8_e4m3fn");
  t = base();
  t.k = 40;
  t.lda = t.ldb = 40;
  refused(t, "multiple of 16");
  t = base();
  t.out_dtype = DType::kFloat8E4M3;
  refused(t, "no 8-bit outputs");
  t = base();
  t.in_dtype = DType::kFloat4E2M1;
  t.rhs_dtype = DType::kFloat4E2M1;
  refused(t, "NVFP4");
  if (major < 10) {
    t = base();
    t.rhs_transposed = false;
    t.ldb = 16;
    refused(t, "(Hopper) need a non-transposed lhs [m, k] and a transposed rhs");
    t = base();
    t.block_scaling = BlockScaling::kMxfp8;
    refused(t, "MXFP8 block scaling needs compute capability 10.0; this GPU is");
  }
  EXPECT_EQ(gemm.cached_problems(), 0u);
}

}  // namespace
}  // namespace cgemm
