// The CUDA backend's quantization calls (Backend::amax, all_reduce_max, update_scale, quantize)
// against host references, under mpirun (every rank on a GPU; ranks share the GPUs when there
// are more ranks than GPUs on a node, as gpu_sharing). Bit for bit where the CPU backend must
// agree bit for bit: the casts against cgemm/core/float8.hpp over every bf16 and fp16 bit
// pattern and a sweep of fp32 values (ties, saturation, subnormals, inf, NaN), plain and
// transposed, aligned and not; the amax against a host max that skips NaNs; the scale updates
// against the numeric:: functions run on the host; the max over the ranks exactly. Skips
// without a GPU.

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/float8.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/backends.hpp"

namespace cgemm {
namespace {

std::unique_ptr<MeshComms> g_comms;
std::unique_ptr<Backend> g_backend;

bool all_have_gpu() {
  int ok = cuda_backend_available() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
}

Backend& backend() {
  if (!g_backend) {
    const int gpus = std::max(cuda_device_count(), 1);
    CudaPlacement p;
    p.device = g_comms->local_rank() % gpus;
    p.gpu_sharing = g_comms->local_size() > gpus;
    p.ranks_per_gpu = (g_comms->local_size() + gpus - 1) / gpus;
    g_backend = make_cuda_backend(*g_comms, OverlapOptions{}, p);
    if (g_comms->world_rank() == 0) std::printf("%s\n", g_backend->describe().c_str());
  }
  return *g_backend;
}

// Device buffer owned by the backend.
struct Buf {
  Backend& be;
  void* p;
  Buf(Backend& b, size_t bytes) : be(b), p(b.allocate(std::max<size_t>(bytes, 1))) {}
  ~Buf() { be.release(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  char* at(size_t bytes) const { return static_cast<char*>(p) + bytes; }
};

class CudaQuantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!all_have_gpu()) GTEST_SKIP() << "no GPU on some rank";
  }
};

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// fp32 values where a cast can go wrong: every e4m3 / e5m2 value and the midpoints between
// neighbours (ties, to even), a little above and below each midpoint, the saturation range
// and beyond (inf), subnormals of both formats and of fp32, zeros of both signs, NaNs; and a
// sweep of mantissas at every exponent the formats reach, with both signs.
std::vector<float> fp32_sweep() {
  std::vector<float> v;
  for (const DType fmt : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    std::vector<float> values;
    for (uint32_t c = 0; c < 0x80; ++c) {
      const float x = numeric::narrow_to_float(static_cast<uint8_t>(c), fmt);
      if (std::isfinite(x)) values.push_back(x);
    }
    std::sort(values.begin(), values.end());
    for (size_t i = 0; i + 1 < values.size(); ++i) {
      const float mid = (values[i] + values[i + 1]) / 2;  // exact in fp32
      v.insert(v.end(), {values[i], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
    }
    const float max = numeric::fp8_max(fmt);
    v.insert(v.end(),
             {max, std::nextafter(max, 1e30f), max * 1.03125f, max * 1.0625f, max * 2, max * 1000});
  }
  v.insert(v.end(), {0.0f, std::numeric_limits<float>::infinity(), from_bits(0x00000001u),
                     from_bits(0x007fffffu), from_bits(0x00800000u), 1e-30f,
                     std::numeric_limits<float>::max(), from_bits(0x7fc00000u),
                     from_bits(0x7f800001u), from_bits(0xffc00000u)});
  for (int e = -28; e <= 17; ++e) {
    for (uint32_t m = 0; m < (1u << 23); m += 4099) {
      v.push_back(std::ldexp(1.0f + static_cast<float>(m) / 8388608.0f, e));
    }
  }
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

// Every 16-bit pattern (bf16 or fp16 source), or the fp32 sweep, as src bytes.
std::vector<unsigned char> source_bits(DType t) {
  std::vector<unsigned char> bits;
  if (t == DType::kFloat32) {
    const std::vector<float> v = fp32_sweep();
    bits.resize(v.size() * 4);
    std::memcpy(bits.data(), v.data(), bits.size());
  } else {
    bits.resize(65536 * 2);
    for (uint32_t i = 0; i < 65536; ++i) {
      const auto h = static_cast<uint16_t>(i);
      std::memcpy(bits.data() + 2 * i, &h, 2);
    }
  }
  return bits;
}

std::vector<float> decode(const std::vector<unsigned char>& bits, DType t, size_t count) {
  std::vector<float> f(count);
  convert_to_float(bits.data(), t, f.data(), static_cast<int64_t>(count));
  return f;
}

// A scale state with `scale` (and 1 / scale) in place, on the device.
void put_state(Backend& be, void* state, float scale) {
  std::vector<float> s(static_cast<size_t>(ScaleStateLayout::floats(4)), 0.0f);
  s[ScaleStateLayout::kScale] = scale;
  s[ScaleStateLayout::kScaleInv] = 1.0f / scale;
  be.copy_from_host(state, s.data(), s.size() * 4);
}

std::string hex(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", b);
  return buf;
}

// Quantizes `rows` x `cols` elements of `src` (elements offset `src_offset` into the device
// copy, for unaligned starts; likewise `dst_offset` bytes) and compares every code with
// float8.hpp's cast of (value * scale), transposed or not.
void check_quantize(Backend& be, DType src_t, const std::vector<unsigned char>& bits, int64_t rows,
                    int64_t cols, DType fmt, bool transpose, float scale, size_t src_offset,
                    size_t dst_offset) {
  const size_t count = static_cast<size_t>(rows * cols);
  const size_t es = dtype_size(src_t);
  ASSERT_LE(count * es, bits.size());
  const std::vector<float> x = decode(bits, src_t, count);
  Buf src(be, (count + src_offset) * es), dst(be, count + dst_offset + 64),
      state(be, static_cast<size_t>(ScaleStateLayout::floats(4)) * 4);
  be.copy_from_host(src.at(src_offset * es), bits.data(), count * es);
  put_state(be, state.p, scale);
  // Poison: 0xaa is no cast's result here for the bytes that must stay as they are.
  std::vector<unsigned char> poison(count + dst_offset + 64, 0xaa);
  be.copy_from_host(dst.p, poison.data(), poison.size());
  QuantizeTask t;
  t.rows = rows;
  t.cols = cols;
  t.src_dtype = src_t;
  t.src = src.at(src_offset * es);
  t.format = fmt;
  t.dst = dst.at(dst_offset);
  t.transpose = transpose;
  t.state = static_cast<const float*>(state.p);
  t.label = "test";
  be.quantize(t, 0);
  std::vector<unsigned char> got(poison.size());
  be.copy_to_host(got.data(), dst.p, got.size());
  const std::string what = std::string(dtype_name(src_t)) + " -> " + std::string(dtype_name(fmt)) +
                           (transpose ? " transposed" : "") + ", " + std::to_string(rows) + " x " +
                           std::to_string(cols) + ", scale " + std::to_string(scale) +
                           ", offsets " + std::to_string(src_offset) + "/" +
                           std::to_string(dst_offset);
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[static_cast<size_t>(r * cols + c)] * scale;
      const uint8_t want = numeric::float_to_narrow(v, fmt);
      const size_t at = dst_offset + static_cast<size_t>(transpose ? c * rows + r : r * cols + c);
      if (got[at] != want && ++bad <= 8) {
        ADD_FAILURE() << what << ": element (" << r << ", " << c << ") = " << v << " (bits "
                      << std::hex << numeric::float_bits(v) << std::dec << "): got " << hex(got[at])
                      << ", float8.hpp " << hex(want);
      }
    }
  }
  EXPECT_EQ(bad, 0) << what;
  for (size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(got[i], 0xaa) << what << ": wrote before dst";
  for (size_t i = dst_offset + count; i < got.size(); ++i) {
    ASSERT_EQ(got[i], 0xaa) << what << ": wrote past dst";
  }

  // The same cast measuring the amax as it reads (QuantizeTask::amax, delayed scaling's): the
  // same bytes, and max |x| with NaNs skipped (Backend::amax's value) over a stale value.
  float want_amax = 0.0f;
  for (const float v : x) {
    if (!std::isnan(v)) want_amax = std::max(want_amax, std::abs(v));
  }
  Buf amax(be, 4);
  const float stale = 1e30f;
  be.copy_from_host(amax.p, &stale, 4);
  be.copy_from_host(dst.p, poison.data(), poison.size());
  t.amax = static_cast<float*>(amax.p);
  be.quantize(t, 0);
  std::vector<unsigned char> again(poison.size());
  be.copy_to_host(again.data(), dst.p, again.size());
  float got_amax = -1.0f;
  be.copy_to_host(&got_amax, amax.p, 4);
  EXPECT_TRUE(again == got) << what << ": other bytes when the cast measures the amax";
  EXPECT_EQ(numeric::float_bits(got_amax), numeric::float_bits(want_amax))
      << what << ": amax " << got_amax << ", want " << want_amax;
}

TEST_F(CudaQuantizeTest, CastsMatchFloat8HppBitForBit) {
  Backend& be = backend();
  for (const DType src_t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const std::vector<unsigned char> bits = source_bits(src_t);
    const auto count = static_cast<int64_t>(bits.size() / dtype_size(src_t));
    for (const DType fmt : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
      for (const float scale : {1.0f, 0.3779f, 117.25f}) {
        // Plain: one long row (the vector path and its tail), then from an unaligned start.
        check_quantize(be, src_t, bits, 1, count, fmt, false, scale, 0, 0);
        check_quantize(be, src_t, bits, 1, count - 3, fmt, false, scale, 1, 3);
      }
    }
  }
}

TEST_F(CudaQuantizeTest, TransposedCastsMatchFloat8HppBitForBit) {
  Backend& be = backend();
  for (const DType src_t : {DType::kBFloat16, DType::kFloat32, DType::kFloat16}) {
    const std::vector<unsigned char> bits = source_bits(src_t);
    for (const DType fmt : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
      // (source_bits holds at least 65536 values: every shape stays within them.)
      // Whole tiles with vector loads and stores; rows a multiple of 8 but not of 16; columns
      // a multiple of 4 but not of 8; a partial column of tiles; rows a multiple of 4 but not
      // of 8; odd edges on both dims; a single row and a single column; an unaligned source
      // and destination (scalar paths). The middle two are where the [128, 128] tile of
      // docs/data/2026-12-07-fp8-kernels/transpose_probe.cu (16-byte loads and stores) would
      // change path, kept for when it replaces this kernel.
      check_quantize(be, src_t, bits, 256, 256, fmt, true, 1.0f, 0, 0);
      check_quantize(be, src_t, bits, 248, 256, fmt, true, 1.25f, 0, 0);
      check_quantize(be, src_t, bits, 256, 132, fmt, true, 0.5f, 0, 0);
      check_quantize(be, src_t, bits, 192, 320, fmt, true, 2.5f, 0, 0);
      check_quantize(be, src_t, bits, 260, 72, fmt, true, 1.5f, 0, 0);
      check_quantize(be, src_t, bits, 67, 133, fmt, true, 0.75f, 0, 0);
      check_quantize(be, src_t, bits, 1, 1000, fmt, true, 1.0f, 0, 0);
      check_quantize(be, src_t, bits, 1000, 1, fmt, true, 1.0f, 0, 0);
      check_quantize(be, src_t, bits, 128, 128, fmt, true, 1.0f, 1, 1);
      // A source 4 elements in (8 bytes for 16-bit kinds, 16 for fp32) and a destination 16
      // bytes in.
      check_quantize(be, src_t, bits, 128, 128, fmt, true, 1.0f, 4, 16);
      // Plain layout of the same shapes, for the record.
      check_quantize(be, src_t, bits, 67, 133, fmt, false, 0.75f, 0, 0);
    }
  }
}

// FP8 codes transposed as they are (QuantizeTask with an FP8 source: the colwise copy of a
// gathered FP8 tensor): every byte value, whole tiles, partial tiles, a single row and column,
// and unaligned pointers (the scalar paths), against the host's transpose.
TEST_F(CudaQuantizeTest, Fp8CodesTransposeAsTheyAre) {
  Backend& be = backend();
  struct Shape2 {
    int64_t rows, cols;
    size_t offset;
  };
  for (const DType fmt : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    for (const Shape2 sh :
         {Shape2{256, 256, 0}, Shape2{264, 256, 0}, Shape2{256, 132, 0}, Shape2{192, 320, 0},
          Shape2{67, 133, 0}, Shape2{1, 1000, 0}, Shape2{1000, 1, 0}, Shape2{128, 128, 1}}) {
      const auto count = static_cast<size_t>(sh.rows * sh.cols);
      std::vector<uint8_t> src(count), want(count), got(count, 0xa5);
      for (size_t i = 0; i < count; ++i) src[i] = static_cast<uint8_t>((i * 131 + 7) % 256);
      for (int64_t r = 0; r < sh.rows; ++r) {
        for (int64_t c = 0; c < sh.cols; ++c) {
          want[static_cast<size_t>(c * sh.rows + r)] = src[static_cast<size_t>(r * sh.cols + c)];
        }
      }
      Buf in(be, count + 8), out(be, count + 8);
      be.copy_from_host(in.at(sh.offset), src.data(), count);
      be.copy_from_host(out.at(sh.offset), got.data(), count);
      QuantizeTask t;
      t.rows = sh.rows;
      t.cols = sh.cols;
      t.src_dtype = fmt;
      t.src = in.at(sh.offset);
      t.format = fmt;
      t.dst = out.at(sh.offset);
      t.transpose = true;
      be.quantize(t, 0);
      be.synchronize();
      be.copy_to_host(got.data(), out.at(sh.offset), count);
      EXPECT_EQ(got, want) << dtype_name(fmt) << " " << sh.rows << " x " << sh.cols << " offset "
                           << sh.offset;
      // Codes moved as they are have no amax to measure: refused by name.
      Buf amax(be, 4);
      t.amax = static_cast<float*>(amax.p);
      try {
        be.quantize(t, 0);
        ADD_FAILURE() << "an amax asked of an FP8-codes transpose was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no amax"), std::string::npos) << e.what();
      }
    }
  }
}

// The amax a cast measures (QuantizeTask::amax) wherever the one largest magnitude lies: the
// first element, the middle, the last vector's end and the scalar tail past it, in the plain
// cast (vector loop and tail) and the transposed one (whole and edge tiles), from an aligned
// and an unaligned source, each kind. Finite normal values, so no inf or NaN stands in for it.
TEST_F(CudaQuantizeTest, CastMeasuresTheAmaxWhereverTheMaxIs) {
  Backend& be = backend();
  struct Case {
    int64_t rows, cols;
    bool transpose;
    size_t offset;
  };
  for (const DType src_t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (const Case c : {Case{1, 1003, false, 0}, Case{1, 4096, false, 1}, Case{256, 256, true, 0},
                         Case{67, 133, true, 0}, Case{128, 128, true, 1}}) {
      const int64_t n = c.rows * c.cols;
      for (const int64_t at : {int64_t{0}, n / 2, n - 4, n - 1}) {
        std::vector<float> f(static_cast<size_t>(n));
        for (size_t i = 0; i < f.size(); ++i) f[i] = numeric::normal_value(29, i, 0.5f);
        for (float& v : f) v = std::max(-3.0f, std::min(3.0f, v));
        f[static_cast<size_t>(at)] = -6.5f;  // exact in every kind
        const size_t es = dtype_size(src_t);
        std::vector<unsigned char> bits(f.size() * es);
        convert_from_float(f.data(), bits.data(), src_t, n);
        Buf src(be, (f.size() + c.offset) * es), dst(be, f.size()), amax(be, 4),
            state(be, static_cast<size_t>(ScaleStateLayout::floats(4)) * 4);
        be.copy_from_host(src.at(c.offset * es), bits.data(), bits.size());
        put_state(be, state.p, 1.0f);
        const float stale = 1e30f;
        be.copy_from_host(amax.p, &stale, 4);
        QuantizeTask t;
        t.rows = c.rows;
        t.cols = c.cols;
        t.src_dtype = src_t;
        t.src = src.at(c.offset * es);
        t.format = DType::kFloat8E4M3;
        t.dst = dst.p;
        t.transpose = c.transpose;
        t.state = static_cast<const float*>(state.p);
        t.amax = static_cast<float*>(amax.p);
        be.quantize(t, 0);
        float got = -1.0f;
        be.copy_to_host(&got, amax.p, 4);
        EXPECT_EQ(got, 6.5f) << dtype_name(src_t) << " " << c.rows << " x " << c.cols
                             << (c.transpose ? " transposed" : "") << ", offset " << c.offset
                             << ", the max at " << at;
      }
    }
  }
  // An empty source's amax is 0, over a stale value.
  Buf amax(be, 4), state(be, static_cast<size_t>(ScaleStateLayout::floats(4)) * 4);
  put_state(be, state.p, 1.0f);
  const float stale = 1e30f;
  be.copy_from_host(amax.p, &stale, 4);
  QuantizeTask empty;
  empty.rows = 0;
  empty.cols = 16;
  empty.state = static_cast<const float*>(state.p);
  empty.amax = static_cast<float*>(amax.p);
  be.quantize(empty, 0);
  float got = -1.0f;
  be.copy_to_host(&got, amax.p, 4);
  EXPECT_EQ(got, 0.0f) << "the amax of an empty source";
}

// The weight's [K, N] -> [N, K] copy at a realistic size: every code checked.
TEST_F(CudaQuantizeTest, TransposedWeightSized) {
  Backend& be = backend();
  const int64_t rows = 1024, cols = 3072;
  std::vector<float> f(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < f.size(); ++i) f[i] = numeric::normal_value(5, i, 1.0f);
  std::vector<unsigned char> bits(f.size() * 2);
  convert_from_float(f.data(), bits.data(), DType::kBFloat16, static_cast<int64_t>(f.size()));
  check_quantize(be, DType::kBFloat16, bits, rows, cols, DType::kFloat8E4M3, true, 448.0f / 4.5f, 0,
                 0);
}

TEST_F(CudaQuantizeTest, AmaxMatchesHostSkippingNan) {
  Backend& be = backend();
  for (const DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000003}}) {
      for (const size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {
        std::vector<float> f(static_cast<size_t>(count));
        for (size_t i = 0; i < f.size(); ++i) f[i] = numeric::normal_value(17, i, 2.0f);
        if (count > 100) {
          f[5] = std::nanf("");                         // skipped
          f[static_cast<size_t>(count) - 1] = -40.75f;  // the largest magnitude, negative, last
        }
        std::vector<unsigned char> bits(f.size() * dtype_size(t) + 1);
        convert_from_float(f.data(), bits.data(), t, count);
        const std::vector<float> x = decode(bits, t, f.size());
        float want = 0.0f;
        for (const float v : x) {
          if (!std::isnan(v)) want = std::max(want, std::abs(v));
        }
        Buf src(be, (f.size() + offset) * dtype_size(t)), out(be, 4);
        be.copy_from_host(src.at(offset * dtype_size(t)), bits.data(), f.size() * dtype_size(t));
        const float junk = 123.0f;  // the call zeroes its output first
        be.copy_from_host(out.p, &junk, 4);
        be.amax(src.at(offset * dtype_size(t)), t, count, static_cast<float*>(out.p), 0);
        float got = -1.0f;
        be.copy_to_host(&got, out.p, 4);
        EXPECT_EQ(numeric::float_bits(got), numeric::float_bits(want))
            << dtype_name(t) << ", " << count << " elements at offset " << offset << ": got " << got
            << ", want " << want;
      }
    }
  }
  // An infinite value is the amax.
  std::vector<float> f(1000, 1.0f);
  f[500] = -std::numeric_limits<float>::infinity();
  Buf src(be, f.size() * 4), out(be, 4);
  be.copy_from_host(src.p, f.data(), f.size() * 4);
  be.amax(src.p, DType::kFloat32, 1000, static_cast<float*>(out.p), 0);
  float got = 0.0f;
  be.copy_to_host(&got, out.p, 4);
  EXPECT_TRUE(std::isinf(got) && got > 0) << got;
}

TEST_F(CudaQuantizeTest, AllReduceMaxOverTheWorld) {
  Backend& be = backend();
  const int rank = g_comms->world_rank(), size = g_comms->world_size();
  constexpr int kCount = 5;
  std::vector<float> mine(kCount);
  for (int i = 0; i < kCount; ++i) mine[static_cast<size_t>(i)] = std::ldexp(1.0f + rank, i) * 0.1f;
  mine[2] = rank == size - 1 ? 0.0f : 7.5f;  // the max may come from any rank
  Buf buf(be, kCount * 4);
  be.copy_from_host(buf.p, mine.data(), kCount * 4);
  be.all_reduce_max(static_cast<float*>(buf.p), kCount, 0, "test amaxes");
  std::vector<float> got(kCount);
  be.copy_to_host(got.data(), buf.p, kCount * 4);
  for (int i = 0; i < kCount; ++i) {
    float want = 0.0f;
    for (int r = 0; r < size; ++r) {
      const float v = i == 2 ? (r == size - 1 ? 0.0f : 7.5f) : std::ldexp(1.0f + r, i) * 0.1f;
      want = std::max(want, v);
    }
    EXPECT_EQ(got[static_cast<size_t>(i)], want) << "element " << i;
  }
}

// A run of scale updates on the device and the same numeric:: calls on the host give the same
// state bits after every step: current scaling, and delayed scaling with a short history that
// wraps (max and most_recent, margins 0 and 2), amaxes of 0 and inf included.
TEST_F(CudaQuantizeTest, UpdateScaleMatchesNumericBitForBit) {
  Backend& be = backend();
  const std::vector<float> amaxes = {
      3.5f,  0.0f,   17.25f, 1e-3f, std::numeric_limits<float>::infinity(),
      2.0f,  448.0f, 1e-30f, 5.0f,  0.75f,
      60.0f, 1e+30f, 0.125f};
  struct Setup {
    bool delayed;
    int history;
    AmaxAlgo algo;
    int margin;
    DType fmt;
  };
  const Setup setups[] = {{false, 1, AmaxAlgo::kMax, 0, DType::kFloat8E4M3},
                          {false, 1, AmaxAlgo::kMax, 2, DType::kFloat8E5M2},
                          {true, 3, AmaxAlgo::kMax, 0, DType::kFloat8E4M3},
                          {true, 3, AmaxAlgo::kMostRecent, 0, DType::kFloat8E4M3},
                          {true, 4, AmaxAlgo::kMax, 2, DType::kFloat8E5M2},
                          {true, 1024, AmaxAlgo::kMax, 0, DType::kFloat8E4M3}};
  for (const Setup& s : setups) {
    const auto floats = static_cast<size_t>(ScaleStateLayout::floats(s.history));
    std::vector<float> host(floats, 0.0f);
    host[ScaleStateLayout::kScale] = 1.0f;
    host[ScaleStateLayout::kScaleInv] = 1.0f;
    Buf state(be, floats * 4), amax(be, 4);
    be.copy_from_host(state.p, host.data(), floats * 4);
    ScaleUpdate u;
    u.state = static_cast<float*>(state.p);
    u.amax = static_cast<const float*>(amax.p);
    u.rule = s.delayed ? ScaleRule::kDelayed : ScaleRule::kCurrent;
    u.recipe.amax_history_len = s.history;
    u.recipe.algo = s.algo;
    u.recipe.margin = s.margin;
    u.fp8_max = numeric::fp8_max(s.fmt);
    for (size_t step = 0; step < amaxes.size(); ++step) {
      be.copy_from_host(amax.p, &amaxes[step], 4);
      be.update_scale(u, 0);
      if (s.delayed) {
        numeric::update_delayed_scale(host.data(), amaxes[step], s.history, s.algo, u.fp8_max,
                                      s.margin);
      } else {
        numeric::update_current_scale(host.data(), amaxes[step], u.fp8_max, s.margin);
      }
      std::vector<float> got(floats);
      be.copy_to_host(got.data(), state.p, floats * 4);
      ASSERT_EQ(std::memcmp(got.data(), host.data(), floats * 4), 0)
          << (s.delayed ? "delayed" : "current") << " history " << s.history << " margin "
          << s.margin << ", step " << step << ": scale " << got[0] << " vs " << host[0]
          << ", scale_inv " << got[1] << " vs " << host[1] << ", steps " << got[2] << " vs "
          << host[2];
    }
  }
}

TEST_F(CudaQuantizeTest, BlockScalingRefusedBelowComputeCapability10) {
  Backend& be = backend();
  if (be.compute_capability() >= 100) GTEST_SKIP() << "compute capability 10.0 or newer";
  Buf src(be, 64 * 64 * 2), dst(be, 64 * 64), state(be, 64), scales(be, 256);
  for (const BlockScaling b : {BlockScaling::kMxfp8, BlockScaling::kNvfp4}) {
    QuantizeTask t;
    t.rows = 64;
    t.cols = 64;
    t.src = src.p;
    t.dst = dst.p;
    t.state = static_cast<const float*>(state.p);
    t.block_scale = static_cast<uint8_t*>(scales.p);
    t.scaling = b;
    t.format = b == BlockScaling::kNvfp4 ? DType::kFloat4E2M1 : DType::kFloat8E4M3;
    try {
      be.quantize(t, 0);
      ADD_FAILURE() << "block scaling was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("needs compute capability 10.0; this GPU is"), std::string::npos) << msg;
      EXPECT_NE(msg.find(b == BlockScaling::kMxfp8 ? "MXFP8" : "NVFP4"), std::string::npos) << msg;
    }
  }
}

// Traced, the quantization calls are spans of category "quantize" with their bytes.
TEST_F(CudaQuantizeTest, TracedAsQuantize) {
  Backend& be = backend();
  Buf src(be, 4096 * 2), dst(be, 4096), state(be, 64), amax(be, 4);
  be.fill_normal(src.p, DType::kBFloat16, {4096}, {4096}, {0}, 3, 1.0f);
  put_state(be, state.p, 1.0f);
  be.set_tracing(true);
  be.amax(src.p, DType::kBFloat16, 4096, static_cast<float*>(amax.p), 0);
  be.all_reduce_max(static_cast<float*>(amax.p), 1, 0, "test");
  ScaleUpdate u;
  u.state = static_cast<float*>(state.p);
  u.amax = static_cast<const float*>(amax.p);
  be.update_scale(u, 0);
  QuantizeTask t;
  t.rows = 64;
  t.cols = 64;
  t.src = src.p;
  t.dst = dst.p;
  t.state = static_cast<const float*>(state.p);
  be.quantize(t, 0);
  const std::vector<TraceSpan> spans = be.take_trace();
  be.set_tracing(false);
  int quantize = 0;
  for (const TraceSpan& s : spans) {
    if (s.category == "quantize") {
      ++quantize;
      EXPECT_GT(s.bytes, 0) << s.name;
      EXPECT_GE(s.end_ms, s.start_ms) << s.name;
    }
  }
  EXPECT_EQ(quantize, 4);
}

// Not a check: prints the quantization kernels' bandwidth (bytes read + written per second)
// beside a device-to-device copy of the same source in the same run, at 64 MiB of bf16 (the
// issue's target: >= 80% of the copy's). cgemm-bench is the measurement of record.
TEST_F(CudaQuantizeTest, PrintsBandwidthAgainstCopy) {
  Backend& be = backend();
  if (g_comms->world_size() > 1) GTEST_SKIP() << "timed on one rank only";
  const int64_t rows = 4096, cols = 8192;  // 64 MiB of bf16
  const auto count = static_cast<size_t>(rows * cols);
  Buf src(be, count * 2), copy(be, count * 2), dst(be, count), state(be, 64), amax(be, 4);
  be.fill_normal(src.p, DType::kBFloat16, {rows, cols}, {rows, cols}, {0, 0}, 9, 1.0f);
  put_state(be, state.p, 64.0f);
  QuantizeTask t;
  t.rows = rows;
  t.cols = cols;
  t.src = src.p;
  t.dst = dst.p;
  t.state = static_cast<const float*>(state.p);
  constexpr int kReps = 20;
  const auto gbps = [&](double bytes, const auto& op) {
    op();  // warm-up
    const double ms = be.time_ms([&] {
      for (int i = 0; i < kReps; ++i) op();
    });
    return bytes * kReps / (ms * 1e-3) / 1e9;
  };
  const double copy_gbps =
      gbps(4.0 * static_cast<double>(count), [&] { be.copy(copy.p, src.p, count * 2, 0, "copy"); });
  const double amax_gbps = gbps(2.0 * static_cast<double>(count), [&] {
    be.amax(src.p, DType::kBFloat16, static_cast<int64_t>(count), static_cast<float*>(amax.p), 0);
  });
  t.transpose = false;
  const double plain_gbps = gbps(3.0 * static_cast<double>(count), [&] { be.quantize(t, 0); });
  QuantizeTask tt = t;
  tt.transpose = true;
  const double transposed_gbps =
      gbps(3.0 * static_cast<double>(count), [&] { be.quantize(tt, 0); });
  std::printf(
      "64 MiB bf16 [4096, 8192], GB/s read + written: copy %.0f; amax %.0f (%.0f%%); quantize "
      "e4m3 %.0f (%.0f%%); quantize-transpose e4m3 %.0f (%.0f%%)\n",
      copy_gbps, amax_gbps, 100 * amax_gbps / copy_gbps, plain_gbps, 100 * plain_gbps / copy_gbps,
      transposed_gbps, 100 * transposed_gbps / copy_gbps);
}

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // An exception on one rank must end the job, not leave the others in a collective.
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
  cgemm::g_backend.reset();
  cgemm::g_comms.reset();
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
