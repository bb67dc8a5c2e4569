// The grouped GEMM's runtime (cgemm/runtime/grouped_plan.hpp, issue 25 item 2) on the CPU
// backend, one rank (a Context needs MPI): both forms in every layout the runtime runs, each
// dtype, per group against an fp64 reference computed here from fresh random inputs (never
// zero), the output poisoned with NaN before every run; uniform, skewed and empty groups, one
// group holding everything, G = 1; bias on and off; sizes from host and from backend memory.
// Then the checks made before anything runs (sum, negative size, wrong G) and the planner's
// refusals, each with its message, and the output still poisoned after a refused call.
//
// Bounds per output element, against the fp64 reference r (the GEMM without bias) and the
// bias value c: |out - (r + c)| <= eps * (|r| + |c|) + acc * sum_p |a_ip b_pj| + 1e-30, with
// eps = 2^-7 for bfloat16, 2^-10 for float16, 2^-21 for float32 outputs (the CPU backend
// accumulates in fp64 and rounds to the output once, after adding the bias in fp32: two
// roundings at most) and acc = 0 on the CPU backend, 2^-16 on the CUDA backend (cuBLASLt
// accumulates in fp32: at most k * 2^-24 of the magnitude sum, k <= 96 here).
//
// With --backend=cuda (tests/gpu/gpu_tests.cmake) the same cases run on the CUDA backend: a
// loop of cuBLASLt GEMMs on stream 0; every case skips without a GPU. The cuBLAS grouped path
// (GroupedPath::kCublasGrouped: one cublasGemmGroupedBatchedEx per call, the bias filled in
// first and added with beta = 1) and the cuBLASLt tiles path (GroupedPath::kCublasLtTiles:
// pointer-array batched matmuls over row tiles, the bias by cuBLASLt's epilogue) are checked the
// same way for the ragged-rows form in every dtype each runs, plus calls in flight on one plan
// beyond its staging slots, an unaligned call that falls back to the loop, and their refusals
// (fp32 for cuBLAS grouped, a wider output, the wgrad form, K = 0); on the CPU backend those
// cases run the loop.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/float8.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/grouped_plan.hpp"

namespace cgemm {
namespace {

std::unique_ptr<Context> g_ctx;
uint32_t g_seed = 0;
uint32_t g_stream = 0;      // a new random stream for every tensor
bool g_cuda = false;        // --backend=cuda
bool g_no_backend = false;  // --backend=cuda without a GPU: every case skips

class GroupedPlan : public testing::Test {
 protected:
  void SetUp() override {
    if (g_no_backend) GTEST_SKIP() << "no GPU: the CUDA backend cannot run";
  }
};

Backend& be() { return g_ctx->backend(); }

// FP8 bytes <-> float (core/float8.hpp; convert_* covers the 16- and 32-bit types).
void fp8_from_float(const float* f, void* dst, DType t, int64_t n) {
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    d[i] = t == DType::kFloat8E4M3 ? numeric::float_to_e4m3(f[i]) : numeric::float_to_e5m2(f[i]);
  }
}
void fp8_to_float(const void* src, DType t, float* f, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    f[i] = t == DType::kFloat8E4M3 ? numeric::e4m3_to_float(b[i]) : numeric::e5m2_to_float(b[i]);
  }
}

// Values in +-[0.25, 1] (FP8: +-[0.5, 2], standard deviation about 1 as Transformer Engine's FP8
// tests draw), rounded to `dtype` so the reference reads what the GEMM reads.
std::vector<double> random_values(int64_t count, DType dtype) {
  std::mt19937 gen(g_seed + 7919u * ++g_stream);
  const float lo = is_fp8(dtype) ? 0.5f : 0.25f;
  std::uniform_real_distribution<float> mag(lo, 4.0f * lo);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> f(static_cast<size_t>(count));
  for (float& x : f) x = sign(gen) ? mag(gen) : -mag(gen);
  if (is_fp8(dtype)) {
    std::vector<char> bytes(f.size() + 1);
    fp8_from_float(f.data(), bytes.data(), dtype, count);
    fp8_to_float(bytes.data(), dtype, f.data(), count);
    return {f.begin(), f.end()};
  }
  std::vector<char> buf(f.size() * dtype_size(dtype) + 1);
  convert_from_float(f.data(), buf.data(), dtype, count);
  convert_to_float(buf.data(), dtype, f.data(), count);
  return {f.begin(), f.end()};
}

// A backend buffer holding `v` in `dtype`.
struct Buffer {
  void* p = nullptr;
  Buffer(const std::vector<double>& v, DType dtype) {
    std::vector<float> f(v.begin(), v.end());
    std::vector<char> host(f.size() * dtype_size(dtype) + 1);
    if (is_fp8(dtype)) {
      fp8_from_float(f.data(), host.data(), dtype, static_cast<int64_t>(f.size()));
    } else {
      convert_from_float(f.data(), host.data(), dtype, static_cast<int64_t>(f.size()));
    }
    p = be().allocate(host.size());
    be().copy_from_host(p, host.data(), host.size());
  }
  explicit Buffer(size_t bytes) : p(be().allocate(bytes + 1)) {}
  ~Buffer() { be().release(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

std::vector<double> read_back(const void* p, DType dtype, int64_t count) {
  std::vector<char> host(static_cast<size_t>(count) * dtype_size(dtype) + 1);
  be().copy_to_host(host.data(), p, host.size() - 1);
  std::vector<float> f(static_cast<size_t>(count));
  convert_to_float(host.data(), dtype, f.data(), count);
  return {f.begin(), f.end()};
}

double eps(DType out) {
  if (out == DType::kBFloat16) return std::ldexp(1.0, -7);
  if (out == DType::kFloat16) return std::ldexp(1.0, -10);
  return std::ldexp(1.0, -21);
}

struct Case {
  GroupedForm form = GroupedForm::kRaggedRows;
  std::vector<int32_t> sizes;
  int64_t padding = 0;  // the ragged dim's capacity past the sizes' sum
  int64_t other = 40;   // K (ragged rows) or M (ragged contracting)
  int64_t n = 24;
  bool lhs_trans = false;  // lhs [K, M] (contracting dim 0)
  bool rhs_trans = true;   // rhs [G, N, K] / [N, K]
  DType dtype = DType::kBFloat16;
  std::optional<DType> out_dtype;
  bool bias = false;
  bool backend_sizes = false;
  GroupedPath path = GroupedPath::kAuto;
  // FP8: rhs's format and the scaling mode; group_scale[g] = lhs_scale_inv[g] *
  // rhs_scale_inv[g] (empty: 1), applied to the reference.
  std::optional<DType> rhs_dtype;
  ScalingMode scaling = ScalingMode::kNoScaling;
  std::vector<double> group_scale;
};

std::string describe(const Case& c) {
  std::string s = std::string(grouped_form_name(c.form)) + " " + std::string(dtype_name(c.dtype)) +
                  (c.lhs_trans ? " lhsT" : "") + (c.rhs_trans ? " rhsT" : "") +
                  (c.bias ? " bias" : "") + (c.backend_sizes ? " backend-sizes" : "") + " path " +
                  grouped_path_name(c.path) + " sizes [";
  for (int32_t v : c.sizes) s += std::to_string(v) + " ";
  return s + "]" + (c.padding > 0 ? " padding " + std::to_string(c.padding) : "");
}

GroupedGemmDesc make_desc(const Case& c) {
  const auto g = static_cast<int64_t>(c.sizes.size());
  int64_t ragged = c.padding;
  for (int32_t v : c.sizes) ragged += v;
  GroupedGemmDesc d;
  d.name = "moe";
  d.form = c.form;
  d.num_groups = g;
  d.dtype = c.dtype;
  d.preferred_element_type = c.out_dtype;
  if (c.form == GroupedForm::kRaggedRows) {
    const int64_t m = ragged, k = c.other;
    d.lhs_shape = c.lhs_trans ? Shape{k, m} : Shape{m, k};
    d.lhs_contracting_dims = {c.lhs_trans ? 0 : 1};
    d.rhs_shape = c.rhs_trans ? Shape{g, c.n, k} : Shape{g, k, c.n};
    d.rhs_contracting_dims = {c.rhs_trans ? 2 : 1};
  } else {
    const int64_t m = c.other, k = ragged;
    d.lhs_shape = c.lhs_trans ? Shape{k, m} : Shape{m, k};
    d.lhs_contracting_dims = {c.lhs_trans ? 0 : 1};
    d.rhs_shape = c.rhs_trans ? Shape{c.n, k} : Shape{k, c.n};
    d.rhs_contracting_dims = {c.rhs_trans ? 1 : 0};
  }
  if (c.bias) d.bias_shape = Shape{g, c.n};
  d.path = c.path;
  d.rhs_dtype = c.rhs_dtype;
  d.scaling = c.scaling;
  return d;
}

void check_output(const Case& c, const std::vector<double>& lhs, const std::vector<double>& rhs,
                  const std::vector<double>& bias, const std::vector<double>& out);

// Runs `c` and checks every group's output against the fp64 reference.
void run_and_check(const Case& c) {
  SCOPED_TRACE(describe(c));
  const GroupedGemmDesc d = make_desc(c);
  GroupedGemmPlan plan(*g_ctx, d);
  const DType out_t = c.out_dtype.value_or(c.dtype);
  ASSERT_EQ(plan.out_dtype(), out_t);
  const auto g = static_cast<int64_t>(c.sizes.size());
  // The CPU backend ignores the path; the CUDA backend runs the one asked for, and for auto
  // the cuBLASLt tiles where they run and groups average under kAutoTilesRowsPerGroup rows.
  const int64_t rows_total = std::accumulate(c.sizes.begin(), c.sizes.end(), c.padding);
  const bool tiles_run =
      c.form == GroupedForm::kRaggedRows && c.out_dtype.value_or(c.dtype) == c.dtype && c.other > 0;
  GroupedPath expected = GroupedPath::kLoop;
  if (g_cuda && c.path != GroupedPath::kAuto) expected = c.path;
  if (g_cuda && c.path == GroupedPath::kAuto && tiles_run &&
      rows_total < kAutoTilesRowsPerGroup * static_cast<int64_t>(c.sizes.size())) {
    expected = GroupedPath::kCublasLtTiles;
  }
  ASSERT_EQ(plan.path(), expected);
  const int64_t ragged = plan.ragged_extent();
  const bool rows = c.form == GroupedForm::kRaggedRows;
  const Shape out_shape = rows ? Shape{ragged, c.n} : Shape{g, c.other, c.n};
  ASSERT_EQ(plan.out_shape(), out_shape);

  const auto lhs = random_values(num_elements(d.lhs_shape), c.dtype);
  const auto rhs = random_values(num_elements(d.rhs_shape), c.dtype);
  const auto bias = c.bias ? random_values(g * c.n, out_t) : std::vector<double>{};
  Buffer lhs_buf(lhs, c.dtype), rhs_buf(rhs, c.dtype);
  std::unique_ptr<Buffer> bias_buf;
  if (c.bias) bias_buf = std::make_unique<Buffer>(bias, out_t);
  const int64_t out_count = num_elements(out_shape);
  Buffer out_buf(static_cast<size_t>(out_count) * dtype_size(out_t));
  be().fill_nan(out_buf.p, out_t, out_count);
  const void* bias_p = bias_buf ? bias_buf->p : nullptr;
  if (c.backend_sizes) {
    Buffer sizes_buf(c.sizes.size() * sizeof(int32_t));
    be().copy_from_host(sizes_buf.p, c.sizes.data(), c.sizes.size() * sizeof(int32_t));
    plan.execute_backend_sizes(static_cast<const int32_t*>(sizes_buf.p), lhs_buf.p, rhs_buf.p,
                               bias_p, out_buf.p);
  } else {
    plan.execute(c.sizes, lhs_buf.p, rhs_buf.p, bias_p, out_buf.p);
  }
  check_output(c, lhs, rhs, bias, read_back(out_buf.p, out_t, out_count));
}

// Checks `out` of case `c` (its sizes) against the fp64 reference from lhs, rhs and bias.
void check_output(const Case& c, const std::vector<double>& lhs, const std::vector<double>& rhs,
                  const std::vector<double>& bias, const std::vector<double>& out) {
  const auto g = static_cast<int64_t>(c.sizes.size());
  const DType out_t = c.out_dtype.value_or(c.dtype);
  int64_t ragged = c.padding;
  for (int32_t v : c.sizes) ragged += v;
  const bool rows = c.form == GroupedForm::kRaggedRows;
  const int64_t m_all = rows ? ragged : c.other, k_all = rows ? c.other : ragged;
  const auto a = [&](int64_t i, int64_t p) {
    return lhs[static_cast<size_t>(c.lhs_trans ? p * m_all + i : i * k_all + p)];
  };
  const auto b = [&](int64_t gi, int64_t p, int64_t j) {
    const int64_t base = rows ? gi * k_all * c.n : 0;
    return rhs[static_cast<size_t>(base + (c.rhs_trans ? j * k_all + p : p * c.n + j))];
  };
  int64_t off = 0, bad = 0;
  for (int64_t gi = 0; gi < g; ++gi) {
    const int64_t size = c.sizes[static_cast<size_t>(gi)];
    // Rows: out rows [off, off + size) from lhs rows and rhs[gi]. Contracting: out[gi] from
    // contracting indices [off, off + size).
    const int64_t i0 = rows ? off : 0, i1 = rows ? off + size : c.other;
    const int64_t p0 = rows ? 0 : off, p1 = rows ? k_all : off + size;
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double r = 0.0, mag = 0.0;
        for (int64_t p = p0; p < p1; ++p) {
          r += a(i, p) * b(gi, p, j);
          mag += std::fabs(a(i, p) * b(gi, p, j));
        }
        if (!c.group_scale.empty()) {
          r *= c.group_scale[static_cast<size_t>(gi)];
          mag *= c.group_scale[static_cast<size_t>(gi)];
        }
        const double cb = c.bias ? bias[static_cast<size_t>(gi * c.n + j)] : 0.0;
        const int64_t at = rows ? i * c.n + j : (gi * c.other + i) * c.n + j;
        const double got = out[static_cast<size_t>(at)];
        // FP8 on cuBLASLt accumulates with Hopper's fast accumulation (fewer mantissa bits).
        const double acc = !g_cuda           ? 0.0
                           : is_fp8(c.dtype) ? std::ldexp(1.0, -9)
                                             : std::ldexp(1.0, -16);
        const double bound = eps(out_t) * (std::fabs(r) + std::fabs(cb)) + acc * mag + 1e-30;
        if (!(std::fabs(got - (r + cb)) <= bound)) {  // NaN fails
          if (++bad <= 3) {
            ADD_FAILURE() << "group " << gi << " element (" << i << ", " << j << "): got " << got
                          << ", reference " << r + cb << ", bound " << bound;
          }
        }
      }
    }
    off += size;
  }
  // Padding rows (past the sizes' sum) are zeros, whatever the path and the bias.
  for (int64_t at = off * c.n; rows && at < ragged * c.n; ++at) {
    if (out[static_cast<size_t>(at)] != 0.0 && ++bad <= 3) {
      ADD_FAILURE() << "padding row " << at / c.n << " column " << at % c.n << ": got "
                    << out[static_cast<size_t>(at)] << ", expected 0";
    }
  }
  EXPECT_EQ(bad, 0);
}

const std::vector<std::vector<int32_t>> kRowSizes = {
    {24, 24, 24, 24},  // uniform
    {61, 3, 0, 28},    // skewed, one empty
    {0, 0, 96, 0},     // one group holds every row
    {96},              // G = 1
    {0, 1, 0, 0, 5, 0, 90, 0},
};

TEST_F(GroupedPlan, RaggedRowsEveryDtypeAndLayout) {
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (const auto& sizes : kRowSizes) {
      for (int layout = 0; layout < 4; ++layout) {
        Case c;
        c.dtype = t;
        c.sizes = sizes;
        c.lhs_trans = (layout & 1) != 0;
        c.rhs_trans = (layout & 2) != 0;
        c.bias = layout == 1 || layout == 2;
        run_and_check(c);
      }
    }
  }
}

TEST_F(GroupedPlan, RaggedContractingEveryDtypeAndLayout) {
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (const auto& sizes : kRowSizes) {
      for (int layout = 0; layout < 4; ++layout) {
        Case c;
        c.form = GroupedForm::kRaggedContracting;
        c.dtype = t;
        c.sizes = sizes;
        c.other = 20;
        c.lhs_trans = (layout & 1) == 0;  // x^T [K, M] first, as a weight gradient reads x
        c.rhs_trans = (layout & 2) != 0;
        c.bias = layout == 0 || layout == 3;
        run_and_check(c);
      }
    }
  }
}

TEST_F(GroupedPlan, PreferredOutputDtype) {
  for (GroupedForm f : {GroupedForm::kRaggedRows, GroupedForm::kRaggedContracting}) {
    Case c;
    c.form = f;
    c.sizes = {10, 0, 50, 36};
    c.out_dtype = DType::kFloat32;
    c.bias = true;
    run_and_check(c);
  }
}

TEST_F(GroupedPlan, SizesFromBackendMemory) {
  for (GroupedForm f : {GroupedForm::kRaggedRows, GroupedForm::kRaggedContracting}) {
    for (const auto& sizes : kRowSizes) {
      Case c;
      c.form = f;
      c.sizes = sizes;
      c.bias = true;
      c.backend_sizes = true;
      run_and_check(c);
    }
  }
}

TEST_F(GroupedPlan, FlopsCountTheRaggedWork) {
  Case c;
  c.sizes = {61, 3, 0, 28};
  GroupedGemmPlan rows(*g_ctx, make_desc(c));
  EXPECT_DOUBLE_EQ(rows.flops(c.sizes), 2.0 * 92 * 40 * 24);
  c.form = GroupedForm::kRaggedContracting;
  GroupedGemmPlan wgrad(*g_ctx, make_desc(c));
  EXPECT_DOUBLE_EQ(wgrad.flops(c.sizes), 2.0 * 40 * 24 * 92);
}

// Runs `sizes` on `c`'s plan and expects cgemm::Error with `message`; the output must still
// be all NaN (nothing ran).
void expect_refused_call(const Case& c, const std::vector<int32_t>& sizes, bool backend_sizes,
                         const std::string& message) {
  SCOPED_TRACE(describe(c));
  GroupedGemmPlan plan(*g_ctx, make_desc(c));
  const GroupedGemmDesc& d = plan.desc();
  Buffer lhs(random_values(num_elements(d.lhs_shape), c.dtype), c.dtype);
  Buffer rhs(random_values(num_elements(d.rhs_shape), c.dtype), c.dtype);
  const int64_t count = num_elements(plan.out_shape());
  Buffer out(static_cast<size_t>(count) * dtype_size(plan.out_dtype()));
  be().fill_nan(out.p, plan.out_dtype(), count);
  try {
    if (backend_sizes) {
      Buffer s(sizes.size() * sizeof(int32_t));
      be().copy_from_host(s.p, sizes.data(), sizes.size() * sizeof(int32_t));
      plan.execute_backend_sizes(static_cast<const int32_t*>(s.p), lhs.p, rhs.p, nullptr, out.p);
    } else {
      plan.execute(sizes, lhs.p, rhs.p, nullptr, out.p);
    }
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
  for (double v : read_back(out.p, plan.out_dtype(), count)) {
    ASSERT_TRUE(std::isnan(v)) << "the refused call wrote the output";
  }
}

TEST_F(GroupedPlan, SizesAreCheckedBeforeAnythingRuns) {
  Case rows;
  rows.sizes = {24, 24, 24, 24};  // M = 96
  for (bool backend : {false, true}) {
    expect_refused_call(rows, {24, 24, 24, 25}, backend,
                        "grouped GEMM 'moe': the group sizes sum to 97, but the ragged dim M "
                        "(lhs rows) = 96 (they may sum to less, the rest being padding, not to "
                        "more)");
    expect_refused_call(rows, {30, -6, 48, 24}, backend,
                        "grouped GEMM 'moe': group 1 has a negative size -6");
  }
  expect_refused_call(rows, {48, 48}, false,
                      "grouped GEMM 'moe': got 2 group sizes, the plan has num_groups 4");
  Case wgrad = rows;
  wgrad.form = GroupedForm::kRaggedContracting;
  expect_refused_call(wgrad, {0, 0, 0, 100}, true,
                      "grouped GEMM 'moe': the group sizes sum to 100, but the ragged contracting "
                      "dim K = 96 (they may sum to less, the rest being padding, not to more)");
}

// Issue 43 item 4: N-D operands collapse at gemm.py's axis boundary into the 2-D GEMM of the
// same memory. Each N-D plan runs on the buffers of a 2-D case and is checked against that
// case's fp64 reference; its output has the planner's N-D shape (lhs kept dims, rhs kept dims).
TEST_F(GroupedPlan, NdOperandsCollapseAtTheAxisBoundary) {
  struct NdCase {
    Case c;  // the 2-D case of the same memory
    Shape lhs, rhs;
    std::vector<int64_t> lhs_dims, rhs_dims;
    Shape out;
  };
  Case rows;  // lhs [96, 40], rhs [G, N, K] = [4, 24, 40], a bias
  rows.sizes = {30, 0, 50, 16};
  rows.bias = true;
  Case rows_nn = rows;  // lhs [K, M] = [40, 96], rhs [G, K, N] = [4, 40, 24]
  rows_nn.lhs_trans = true;
  rows_nn.rhs_trans = false;
  Case wgrad;  // lhs [M, K_total] = [40, 96], rhs [N, K_total] = [24, 96]
  wgrad.form = GroupedForm::kRaggedContracting;
  wgrad.sizes = {16, 48, 0, 32};
  const std::vector<NdCase> cases = {
      {rows, {2, 48, 8, 5}, {4, 4, 6, 8, 5}, {2, 3}, {3, 4}, {2, 48, 4, 6}},
      {rows_nn, {8, 5, 2, 48}, {4, 8, 5, 4, 6}, {0, 1}, {1, 2}, {2, 48, 4, 6}},
      {wgrad, {5, 8, 96}, {4, 6, 96}, {2}, {2}, {4, 5, 8, 4, 6}},
  };
  for (const NdCase& nd : cases) {
    SCOPED_TRACE(describe(nd.c) + " as lhs " + shape_str(nd.lhs) + ", rhs " + shape_str(nd.rhs));
    GroupedGemmDesc d = make_desc(nd.c);
    const auto lhs = random_values(num_elements(d.lhs_shape), d.dtype);
    const auto rhs = random_values(num_elements(d.rhs_shape), d.dtype);
    d.lhs_shape = nd.lhs;
    d.rhs_shape = nd.rhs;
    d.lhs_contracting_dims = nd.lhs_dims;
    d.rhs_contracting_dims = nd.rhs_dims;
    GroupedGemmPlan plan(*g_ctx, d);
    ASSERT_EQ(plan.out_shape(), nd.out);
    ASSERT_EQ(num_elements(d.lhs_shape), static_cast<int64_t>(lhs.size()));
    ASSERT_EQ(num_elements(d.rhs_shape), static_cast<int64_t>(rhs.size()));
    const auto g = static_cast<int64_t>(nd.c.sizes.size());
    const auto bias = nd.c.bias ? random_values(g * nd.c.n, d.dtype) : std::vector<double>{};
    Buffer lhs_buf(lhs, d.dtype), rhs_buf(rhs, d.dtype);
    std::unique_ptr<Buffer> bias_buf;
    if (nd.c.bias) bias_buf = std::make_unique<Buffer>(bias, d.dtype);
    const int64_t out_count = num_elements(nd.out);
    Buffer out_buf(static_cast<size_t>(out_count) * dtype_size(d.dtype));
    be().fill_nan(out_buf.p, d.dtype, out_count);
    plan.execute(nd.c.sizes, lhs_buf.p, rhs_buf.p, bias_buf ? bias_buf->p : nullptr, out_buf.p);
    check_output(nd.c, lhs, rhs, bias, read_back(out_buf.p, d.dtype, out_count));
  }
}

// Found by review: contracting dims pair by list position (jax.lax.dot_general) but the collapse
// contracts them in storage order; a pairing the two would read differently is refused, as are
// negative dims (gemm.py's axis boundary reads them otherwise than the collapse would).
TEST_F(GroupedPlan, NdPairingsThatDifferAreRefused) {
  Case c;
  c.sizes = {2, 3};
  GroupedGemmDesc d = make_desc(c);
  const auto refused = [&](Shape lhs, std::vector<int64_t> lcd, Shape rhs, std::vector<int64_t> rcd,
                           const std::string& why) {
    d.lhs_shape = std::move(lhs);
    d.lhs_contracting_dims = std::move(lcd);
    d.rhs_shape = std::move(rhs);
    d.rhs_contracting_dims = std::move(rcd);
    try {
      GroupedGemmPlan plan(*g_ctx, d);
      ADD_FAILURE() << "planned; expected: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  // rhs dims out of storage order: dot_general pairs lhs dim 1 (2) with rhs dim 2 (2).
  refused({5, 2, 3}, {1, 2}, {2, 3, 2, 7}, {2, 1},
          "list each operand's contracting dims in the order they are stored");
  // Paired sizes 2 and 3 (the products agree).
  refused({5, 2, 3}, {1, 2}, {2, 3, 2, 7}, {1, 2}, "contracting dim 0 has size 2 on the lhs and 3");
  refused({5, 6}, {1}, {2, 3, 2, 6}, {2, 3}, "different numbers of contracting dims");
  refused({5, 2, 3}, {1, 2}, {2, 7, 2, 3}, {2, -1}, "negative contracting dims");
}

// Padded sizes (gemm.py allows sizes that sum to less than the ragged dim: TE's MoE capacity
// buffers): on every path, sizes from the host and from backend memory, with and without a
// bias, the groups' rows are right and the padding rows zero (ragged rows); a ragged
// contraction stops at the sizes' sum (the reference reads only those indices).
TEST_F(GroupedPlan, PaddedSizes) {
  std::vector<GroupedPath> paths{GroupedPath::kAuto, GroupedPath::kLoop,
                                 GroupedPath::kCublasLtDeviceTiles};
  if (g_cuda) {
    paths.push_back(GroupedPath::kCublasGrouped);
    paths.push_back(GroupedPath::kCublasLtTiles);
  }
  for (const std::vector<int32_t>& sizes :
       {std::vector<int32_t>{24, 0, 30, 10}, std::vector<int32_t>{0, 0, 0, 0}}) {
    for (GroupedPath path : paths) {
      for (bool bias : {false, true}) {
        Case c;
        c.sizes = sizes;
        c.padding = 32;
        c.path = path;
        c.bias = bias;
        c.backend_sizes = path == GroupedPath::kCublasLtDeviceTiles || bias;
        run_and_check(c);
      }
    }
    Case wgrad;
    wgrad.form = GroupedForm::kRaggedContracting;
    wgrad.sizes = sizes;
    wgrad.padding = 32;
    wgrad.other = 20;
    wgrad.lhs_trans = true;
    run_and_check(wgrad);
  }
}

template <class E>
void expect_plan_error(const GroupedGemmDesc& d, const std::string& message) {
  try {
    GroupedGemmPlan plan(*g_ctx, d);
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const E& e) {
    EXPECT_EQ(std::string(e.what()), message);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// An FP8 call's scale_inv: each group's lhs and rhs value drawn from [0.5, 2], their product
// recorded in c.group_scale for the reference, both arrays in backend memory.
struct GroupScaleInvs {
  Buffer lhs, rhs;
  GroupScaleInvs(Case& c, std::mt19937& gen)
      : lhs(c.sizes.size() * sizeof(float)), rhs(c.sizes.size() * sizeof(float)) {
    std::uniform_real_distribution<float> scale(0.5f, 2.0f);
    std::vector<float> sl(c.sizes.size()), sr(c.sizes.size());
    for (size_t i = 0; i < sl.size(); ++i) {
      sl[i] = scale(gen);
      sr[i] = scale(gen);
      c.group_scale.push_back(static_cast<double>(sl[i]) * sr[i]);
    }
    be().copy_from_host(lhs.p, sl.data(), sl.size() * sizeof(float));
    be().copy_from_host(rhs.p, sr.data(), sr.size() * sizeof(float));
  }
  const float* l() const { return static_cast<const float*>(lhs.p); }
  const float* r() const { return static_cast<const float*>(rhs.p); }
};

// FP8 with tensor scaling (a scale_inv per group and operand): the ragged-rows form, lhs [M, K]
// and rhs [G, N, K], e4m3 and e5m2 mixes, bf16 and fp32 outputs, bias on and off, delayed and
// current scaling, sizes from the host; out = lhs_scale_inv[g] * rhs_scale_inv[g] * (lhs rows of
// g @ rhs[g]) (+ bias[g]) against fp64. K = 64, N = 32 and groups of multiples of 16 rows:
// cuBLASLt 13.1's FP8 GEMMs on the H200 refused 24 (CUBLAS_STATUS_NOT_SUPPORTED).
TEST_F(GroupedPlan, Fp8RaggedRows) {
  const std::vector<std::pair<DType, DType>> formats = {{DType::kFloat8E4M3, DType::kFloat8E4M3},
                                                        {DType::kFloat8E4M3, DType::kFloat8E5M2},
                                                        {DType::kFloat8E5M2, DType::kFloat8E4M3}};
  std::mt19937 gen(g_seed + 104729u);
  int turn = 0;
  // Uniform, skewed with an empty group, rows that are not multiples of 16 (so group g's
  // lhs and out start anywhere), one group holding every row, G = 1. G > 1 also puts group g's
  // scale_inv at 4g bytes, which cuBLASLt refuses as a scale pointer (the plan's slots).
  const std::vector<std::vector<int32_t>> fp8_sizes = {
      {32, 32, 32, 32}, {64, 16, 0, 16}, {40, 8, 24, 24}, {0, 0, 96, 0}, {96}};
  // The CUDA backend runs both of its FP8 paths; the CPU backend has one (the loop).
  std::vector<GroupedPath> paths{GroupedPath::kLoop};
  if (be().kind() == BackendKind::kCuda) paths.push_back(GroupedPath::kCublasLtTiles);
  for (const auto& [lhs_t, rhs_t] : formats) {
    for (const auto& sizes : fp8_sizes) {
      for (DType out_t : {DType::kBFloat16, DType::kFloat32}) {
        for (bool bias : {false, true}) {
          for (GroupedPath path : paths) {
            Case c;
            c.path = path;
            c.sizes = sizes;
            c.other = 64;
            c.n = 32;
            c.dtype = lhs_t;
            c.rhs_dtype = rhs_t;
            c.out_dtype = out_t;
            c.bias = bias;
            c.scaling = ++turn % 2 == 0 ? ScalingMode::kDelayedTensorScaling
                                        : ScalingMode::kCurrentTensorScaling;
            SCOPED_TRACE(describe(c) + " rhs " + std::string(dtype_name(rhs_t)) + " out " +
                         std::string(dtype_name(out_t)));
            const GroupedGemmDesc d = make_desc(c);
            GroupedGemmPlan plan(*g_ctx, d);
            ASSERT_EQ(plan.path(), path);
            ASSERT_EQ(plan.out_dtype(), out_t);
            const auto g = static_cast<int64_t>(sizes.size());
            const auto lhs = random_values(num_elements(d.lhs_shape), lhs_t);
            const auto rhs = random_values(num_elements(d.rhs_shape), rhs_t);
            const auto bias_v = bias ? random_values(g * c.n, out_t) : std::vector<double>{};
            const GroupScaleInvs si(c, gen);
            Buffer lhs_buf(lhs, lhs_t), rhs_buf(rhs, rhs_t);
            std::unique_ptr<Buffer> bias_buf;
            if (bias) bias_buf = std::make_unique<Buffer>(bias_v, out_t);
            const int64_t count = num_elements(plan.out_shape());
            Buffer out(static_cast<size_t>(count) * dtype_size(out_t));
            be().fill_nan(out.p, out_t, count);
            plan.execute_scaled(sizes, lhs_buf.p, si.l(), rhs_buf.p, si.r(),
                                bias_buf ? bias_buf->p : nullptr, out.p);
            check_output(c, lhs, rhs, bias_v, read_back(out.p, out_t, count));
            // Whether the tiles themselves run is cuBLASLt's answer, not asserted: on an H100
            // with cuBLASLt 13.1 (2026-12-07) its heuristic answers CUBLAS_STATUS_NOT_SUPPORTED
            // for FP8 with a pointer array and an alpha vector, so every call ran the loop
            // (right, checked above). kAuto keeps FP8 on the loop for that reason.
          }
        }
      }
    }
  }
}

// NVTE_JAX_ENFORCE_V2_GROUPED_GEMM, read by every plan as gemm.py reads it: cgemm has no v2
// kernel (nvte_grouped_gemm), so a non-zero integer fails the plan with gemm.py's message, and
// a value that is not an integer with its other one; 0 plans as unset.
TEST_F(GroupedPlan, EnforceV2GroupedGemmIsReadAtPlanning) {
  Case c;
  c.sizes = {24, 24, 24, 24};
  const GroupedGemmDesc d = make_desc(c);
  setenv("NVTE_JAX_ENFORCE_V2_GROUPED_GEMM", "1", 1);
  expect_plan_error<PlanError>(d,
                               "The TE V2 grouped GEMM is not available but "
                               "NVTE_JAX_ENFORCE_V2_GROUPED_GEMM is enabled.");
  setenv("NVTE_JAX_ENFORCE_V2_GROUPED_GEMM", "yes", 1);
  expect_plan_error<PlanError>(
      d, "NVTE_JAX_ENFORCE_V2_GROUPED_GEMM must be an integer (0 or 1), got: 'yes'");
  setenv("NVTE_JAX_ENFORCE_V2_GROUPED_GEMM", "", 1);  // int("") fails in gemm.py too
  expect_plan_error<PlanError>(
      d, "NVTE_JAX_ENFORCE_V2_GROUPED_GEMM must be an integer (0 or 1), got: ''");
  setenv("NVTE_JAX_ENFORCE_V2_GROUPED_GEMM", "0", 1);
  EXPECT_NO_THROW(GroupedGemmPlan(*g_ctx, d));
  unsetenv("NVTE_JAX_ENFORCE_V2_GROUPED_GEMM");
}

// FP8's wgrad form (ragged contracting: out[g] = lhs_scale_inv[g] * rhs_scale_inv[g] * (lhs
// [M, K] columns of g @ rhs [N, K] columns of g^T)), e4m3 and e5m2 mixes, padded and empty
// groups, against fp64; sizes must be multiples of 16 (one message).
TEST_F(GroupedPlan, Fp8RaggedContracting) {
  std::mt19937 gen(g_seed + 7919u);
  for (const auto& [lhs_t, rhs_t] : std::vector<std::pair<DType, DType>>{
           {DType::kFloat8E4M3, DType::kFloat8E4M3}, {DType::kFloat8E5M2, DType::kFloat8E4M3}}) {
    for (const std::vector<int32_t>& sizes :
         {std::vector<int32_t>{32, 16, 0, 48}, std::vector<int32_t>{0, 64, 16, 0}}) {
      Case c;
      c.form = GroupedForm::kRaggedContracting;
      c.sizes = sizes;
      c.padding = sizes[0] == 0 ? 16 : 0;  // K_total 96: 16 columns of padding in the second
      c.other = 32;                        // M
      c.n = 32;
      c.lhs_trans = false;  // lhs [M, K]
      c.rhs_trans = true;   // rhs [N, K]
      c.dtype = lhs_t;
      c.rhs_dtype = rhs_t;
      c.out_dtype = DType::kBFloat16;
      c.scaling = ScalingMode::kDelayedTensorScaling;
      SCOPED_TRACE(describe(c) + " rhs " + std::string(dtype_name(rhs_t)));
      const GroupedGemmDesc d = make_desc(c);
      GroupedGemmPlan plan(*g_ctx, d);
      ASSERT_EQ(plan.path(), GroupedPath::kLoop);
      const auto lhs = random_values(num_elements(d.lhs_shape), lhs_t);
      const auto rhs = random_values(num_elements(d.rhs_shape), rhs_t);
      const GroupScaleInvs si(c, gen);
      Buffer lhs_buf(lhs, lhs_t), rhs_buf(rhs, rhs_t);
      const int64_t count = num_elements(plan.out_shape());
      Buffer out(static_cast<size_t>(count) * 2);
      be().fill_nan(out.p, DType::kBFloat16, count);
      plan.execute_scaled(sizes, lhs_buf.p, si.l(), rhs_buf.p, si.r(), nullptr, out.p);
      check_output(c, lhs, rhs, {}, read_back(out.p, DType::kBFloat16, count));
      std::vector<int32_t> odd = sizes;
      odd[1] -= 8;
      odd[2] += 8;
      try {
        plan.execute_scaled(odd, lhs_buf.p, si.l(), rhs_buf.p, si.r(), nullptr, out.p);
        ADD_FAILURE() << "sizes that are not multiples of 16 ran";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not a multiple of 16 (an FP8 ragged contraction"),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

// FP8's refusals, each one message: the wrong call for the plan, null scale_inv, a layout other
// than lhs [M, K] / rhs [G, N, K], the wgrad form, block scaling, scaling without FP8, FP8 on
// one side only.
TEST_F(GroupedPlan, Fp8Refusals) {
  Case c;
  c.sizes = {24, 24, 24, 24};
  c.other = 48;
  c.dtype = DType::kFloat8E4M3;
  c.out_dtype = DType::kBFloat16;
  c.scaling = ScalingMode::kCurrentTensorScaling;
  GroupedGemmPlan plan(*g_ctx, make_desc(c));
  // kAuto keeps FP8 on the loop (cuBLASLt 13.1 on an H100 has no algorithm for the tiles' FP8).
  EXPECT_EQ(plan.path(), GroupedPath::kLoop);
  Buffer x(96 * 48 * 4);
  const auto expect_error = [](const std::function<void()>& f, const std::string& message) {
    try {
      f();
      ADD_FAILURE() << "no error, expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  };
  expect_error([&] { plan.execute(c.sizes, x.p, x.p, nullptr, x.p); },
               "grouped GEMM 'moe' has FP8 inputs: call execute_scaled with their scale_inv");
  const auto* s = static_cast<const float*>(x.p);
  expect_error([&] { plan.execute_scaled(c.sizes, x.p, nullptr, x.p, s, nullptr, x.p); },
               "grouped GEMM 'moe': lhs_scale_inv is null (an FP8 call needs G float32 values "
               "for each operand)");
  Case bf = c;
  bf.dtype = DType::kBFloat16;
  bf.scaling = ScalingMode::kNoScaling;
  GroupedGemmPlan bf_plan(*g_ctx, make_desc(bf));
  expect_error([&] { bf_plan.execute_scaled(bf.sizes, x.p, s, x.p, s, nullptr, x.p); },
               "grouped GEMM 'moe' has bfloat16 inputs: execute_scaled is for FP8 plans, call "
               "execute");
  const std::string layout_why =
      "FP8 runs lhs [M, K] and rhs [G, N, K] (ragged rows) or [N, K] (ragged contracting) only "
      "(gemm.py's lhs \"N\" / rhs \"T\" scaled data below compute capability 100, cuBLASLt's FP8 "
      "layout)";
  // Below compute capability 100 gemm.py itself refuses the other layouts (the CPU backend
  // and the H200 plan as 90); from 100 on, the runtime refuses them (layout_why).
  Case nn = c;
  nn.rhs_trans = false;  // rhs [G, K, N]
  if (be().compute_capability() < 100) {
    expect_plan_error<PlanError>(make_desc(nn),
                                 "rhs input must be transposed before calling grouped_gemm");
  } else {
    expect_plan_error<Error>(make_desc(nn),
                             "grouped GEMM 'moe' (ragged_rows): layout lhs [96, 48] contracting "
                             "(1,), rhs [4, 48, 24] contracting (1,) is not run: " +
                                 layout_why);
  }
  Case block = c;
  block.scaling = ScalingMode::kMxfp8_1d;
  expect_plan_error<Error>(
      make_desc(block),
      "grouped GEMM 'moe' (ragged_rows): FP8 inputs with scaling "
      "mxfp8_1d_scaling are not run; use delayed_tensor_scaling or current_tensor_scaling (a "
      "scale_inv per group)");
  Case plain = bf;
  plain.scaling = ScalingMode::kCurrentTensorScaling;
  expect_plan_error<Error>(make_desc(plain),
                           "grouped GEMM 'moe' (ragged_rows): scaling current_tensor_scaling "
                           "needs FP8 inputs (dtype float8_e4m3 or float8_e5m2); quantizing "
                           "inside the grouped GEMM is not run");
  Case odd_k = c;
  odd_k.other = 40;  // K 40: FP8 rows of 40 bytes
  expect_plan_error<Error>(
      make_desc(odd_k),
      "grouped GEMM 'moe' (ragged_rows): FP8 GEMMs need 16-byte aligned rows "
      "(cuBLASLt's rule), but the FP8 rows hold 40 contracting bytes (make K a "
      "multiple of 16)");
  Case odd_n = c;
  odd_n.n = 20;  // bf16 out rows of 40 bytes
  expect_plan_error<Error>(make_desc(odd_n),
                           "grouped GEMM 'moe' (ragged_rows): FP8 GEMMs need 16-byte aligned rows "
                           "(cuBLASLt's rule), but the output rows hold 40 bytes (N 20 of "
                           "bfloat16)");
  Case half = c;
  half.rhs_dtype = DType::kBFloat16;
  expect_plan_error<Error>(make_desc(half),
                           "grouped GEMM 'moe' (ragged_rows): lhs is float8_e4m3fn but rhs is "
                           "bfloat16; an FP8 grouped GEMM takes FP8 on both sides");
}

TEST_F(GroupedPlan, PlannerRefusalsPassThrough) {
  Case c;
  c.sizes = {24, 24, 24, 24};
  GroupedGemmDesc d = make_desc(c);  // lhs [96, 40], rhs [4, 24, 40]
  d.bias_shape = Shape{4, 40};
  expect_plan_error<PlanError>(d,
                               "bias shape [4, 40] does not match expected shape (4, prod [24])");
  d = make_desc(c);
  d.dtype = DType::kFloat8E5M2;
  expect_plan_error<PlanError>(d, "FP8 GEMM does not support E5M2 * E5M2");
  d = make_desc(c);
  d.num_groups = 0;
  d.rhs_shape = {0, 24, 40};
  expect_plan_error<PlanError>(
      d,
      "grouped_gemm requires at least one non-empty dimension array. Ensure lhs or rhs tensor "
      "objects carry first_dims or last_dims.");
  d = make_desc(c);
  d.lhs_contracting_dims = {};
  expect_plan_error<PlanError>(
      d, "grouped_gemm: contracting dims (), (2,): an empty list has no last dim (IndexError)");
}

TEST_F(GroupedPlan, RuntimeRefusals) {
  Case c;
  c.sizes = {24, 24, 24, 24};
  GroupedGemmDesc d = make_desc(c);
  d.rhs_shape = {5, 24, 40};
  expect_plan_error<Error>(d,
                           "grouped GEMM 'moe' (ragged_rows): rhs [5, 24, 40] holds 5 groups in "
                           "dim 0, the plan has num_groups 4");
  d = make_desc(c);
  d.dtype = DType::kFloat8E4M3;
  expect_plan_error<Error>(d,
                           "grouped GEMM 'moe' (ragged_rows): FP8 inputs with scaling no_scaling "
                           "are not run; use delayed_tensor_scaling or current_tensor_scaling (a "
                           "scale_inv per group)");
  d = make_desc(c);
  d.rhs_shape = {4, 24, 41};
  expect_plan_error<Error>(d,
                           "grouped GEMM 'moe' (ragged_rows): layout lhs [96, 40] contracting "
                           "(1,), rhs [4, 24, 41] contracting (2,) is not run: contracting dim 0 "
                           "has size 40 on the lhs and 41 on the rhs");
  // N-D operands run (NdOperandsCollapseAtTheAxisBoundary); contracting dims in the middle do
  // not.
  d = make_desc(c);
  d.lhs_shape = {2, 40, 48};
  d.lhs_contracting_dims = {1};
  expect_plan_error<Error>(d,
                           "grouped GEMM 'moe' (ragged_rows): layout lhs [2, 40, 48] contracting "
                           "(1,), rhs [4, 24, 40] contracting (2,) is not run: the lhs's "
                           "contracting dims must be consecutive and its leading or trailing "
                           "dims, with a non-contracting dim besides");
  d = make_desc(c);
  d.num_groups = -1;
  expect_plan_error<Error>(d, "grouped GEMM 'moe' (ragged_rows): num_groups -1 is negative");
}

TEST_F(GroupedPlan, BiasPointerMustMatchThePlan) {
  Case c;
  c.sizes = {24, 24, 24, 24};
  c.bias = true;
  GroupedGemmPlan plan(*g_ctx, make_desc(c));
  Buffer x(4096 * 8);
  try {
    plan.execute(c.sizes, x.p, x.p, nullptr, x.p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "grouped GEMM 'moe' was planned with a bias but got none");
  }
}

// The two CUDA runners of the ragged-rows form (GroupedPath::kCublasGrouped: one
// cublasGemmGroupedBatchedEx per call; GroupedPath::kCublasLtTiles: a pointer-array batched
// cuBLASLt matmul per tile size): the ragged-rows cases above, every dtype each runs, every
// layout, bias on and off, sizes from host and backend memory; for the tiles also groups over
// the tile cap (overlapping last tiles). On the CPU backend the same cases run the loop.
TEST_F(GroupedPlan, CublasGroupedPathRaggedRows) {
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    for (const auto& sizes : kRowSizes) {
      for (int layout = 0; layout < 4; ++layout) {
        for (bool bias : {false, true}) {
          Case c;
          c.path = GroupedPath::kCublasGrouped;
          c.dtype = t;
          c.sizes = sizes;
          c.lhs_trans = (layout & 1) != 0;
          c.rhs_trans = (layout & 2) != 0;
          c.bias = bias;
          c.backend_sizes = layout == 3;
          run_and_check(c);
        }
      }
    }
  }
}

TEST_F(GroupedPlan, CublasLtTilesPathRaggedRows) {
  std::vector<std::vector<int32_t>> all = kRowSizes;
  all.push_back({600, 1, 0, 300});  // over the cap of 256: tiles of 256, the last ones overlap
  all.push_back({256, 512, 257, 255});
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (const auto& sizes : all) {
      for (int layout = 0; layout < 4; ++layout) {
        for (bool bias : {false, true}) {
          Case c;
          c.path = GroupedPath::kCublasLtTiles;
          c.dtype = t;
          c.sizes = sizes;
          c.lhs_trans = (layout & 1) != 0;
          c.rhs_trans = (layout & 2) != 0;
          c.bias = bias;
          c.backend_sizes = layout == 3;
          run_and_check(c);
        }
      }
    }
  }
}

// The device tiles (GroupedPath::kCublasLtDeviceTiles: one pointer-array matmul of fixed
// shape, its pointers computed on the device from the sizes): the ragged-rows cases it runs
// (lhs [M, K]), every dtype, both rhs layouts, bias on and off, sizes from host and backend
// memory, groups over and across the 128-row tiles. On the CPU backend the same cases run the
// loop, reading sizes in backend memory in place.
TEST_F(GroupedPlan, CublasLtDeviceTilesPathRaggedRows) {
  std::vector<std::vector<int32_t>> all = kRowSizes;
  all.push_back({600, 1, 0, 300});
  all.push_back({256, 512, 257, 255});
  all.push_back({128, 0, 127, 129});
  all.push_back({700, 300});
  all.push_back({0, 1000});
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (const auto& sizes : all) {
      for (int layout = 0; layout < 4; ++layout) {
        for (bool bias : {false, true}) {
          Case c;
          c.path = GroupedPath::kCublasLtDeviceTiles;
          c.dtype = t;
          c.sizes = sizes;
          c.rhs_trans = (layout & 1) != 0;
          c.backend_sizes = (layout & 2) != 0;
          c.bias = bias;
          run_and_check(c);
        }
      }
    }
  }
}

// What the device tiles do not run is refused on every backend alike (a plan CI takes is one
// the GPU runs).
TEST_F(GroupedPlan, CublasLtDeviceTilesRefusals) {
  const auto expect = [&](const Case& ci, const std::string& why) {
    expect_plan_error<Error>(make_desc(ci),
                             "grouped GEMM 'moe' (" + std::string(grouped_form_name(ci.form)) +
                                 "): path cublaslt_device_tiles does not run it: " + why +
                                 "; use path loop (or auto)");
  };
  Case c;
  c.sizes = {24, 24, 24, 24};
  c.path = GroupedPath::kCublasLtDeviceTiles;
  Case lhs_t = c;
  lhs_t.lhs_trans = true;
  expect(lhs_t,
         "lhs [K, M] (a group's rows start at any column of it, which the pointer-array matmul "
         "cannot read aligned); give lhs [M, K]");
  Case narrow = c;
  narrow.n = 20;
  expect(narrow,
         "K 40 and N 20 must be multiples of 8 (rows on 16 bytes, as the matmul reads them)");
  Case wgrad = c;
  wgrad.form = GroupedForm::kRaggedContracting;
  expect(wgrad, "it runs the ragged-rows form (forward, dgrad) only");
  Case wide = c;
  wide.out_dtype = DType::kFloat32;
  expect(wide, "the output dtype float32 differs from the inputs' bfloat16");
}

// A tiles call whose lhs rows cannot all start on 16 bytes (lhs [K, M] with tiles at odd
// rows) runs the loop, counted by loop_fallbacks(), and is right; aligned calls are not counted.
TEST_F(GroupedPlan, CublasLtTilesUnalignedCallRunsTheLoop) {
  // The loop_fallbacks() of one call of `c` on fresh inputs.
  const auto fallbacks = [&](const Case& c) {
    const GroupedGemmDesc d = make_desc(c);
    GroupedGemmPlan plan(*g_ctx, d);
    const int64_t nl = num_elements(d.lhs_shape), nr = num_elements(d.rhs_shape);
    Buffer lhs(static_cast<size_t>(nl) * 2), rhs(static_cast<size_t>(nr) * 2);
    Buffer out(static_cast<size_t>(num_elements(plan.out_shape())) * 2);
    be().fill_normal(lhs.p, c.dtype, {nl}, {nl}, {0}, 3, 1.0f);
    be().fill_normal(rhs.p, c.dtype, {nr}, {nr}, {0}, 4, 1.0f);
    plan.execute(c.sizes, lhs.p, rhs.p, nullptr, out.p);
    return plan.loop_fallbacks();
  };
  Case c;
  c.path = GroupedPath::kCublasLtTiles;
  c.sizes = {61, 3, 0, 28};  // lhs [40, 92]: a tile at row 29 starts 58 bytes in
  c.lhs_trans = true;
  run_and_check(c);
  EXPECT_EQ(fallbacks(c), g_cuda ? 1 : 0);
  Case even = c;
  even.sizes = {64, 0, 16, 16};  // lhs [40, 96]: every tile at a multiple of 8 rows
  run_and_check(even);
  EXPECT_EQ(fallbacks(even), 0);
}

// Traces: a runner's call is one "gemm" span named after the plan and its path, with the
// call's FLOPs; the loop's are one span per non-empty group ("NAME group g"). On the CPU backend
// every plan loops.
TEST_F(GroupedPlan, TracedAsGemms) {
  for (GroupedPath path : {GroupedPath::kCublasLtTiles, GroupedPath::kLoop}) {
    Case c;
    c.path = path;
    c.sizes = {64, 0, 16, 16};  // aligned: the tiles run it
    SCOPED_TRACE(describe(c));
    const GroupedGemmDesc d = make_desc(c);
    GroupedGemmPlan plan(*g_ctx, d);
    const int64_t nl = num_elements(d.lhs_shape), nr = num_elements(d.rhs_shape);
    Buffer lhs(static_cast<size_t>(nl) * 2), rhs(static_cast<size_t>(nr) * 2);
    Buffer out(static_cast<size_t>(num_elements(plan.out_shape())) * 2);
    be().fill_normal(lhs.p, c.dtype, {nl}, {nl}, {0}, 3, 1.0f);
    be().fill_normal(rhs.p, c.dtype, {nr}, {nr}, {0}, 4, 1.0f);
    be().set_tracing(true);
    plan.execute(c.sizes, lhs.p, rhs.p, nullptr, out.p);
    const std::vector<TraceSpan> spans = be().take_trace();
    be().set_tracing(false);
    std::vector<std::string> gemms;
    int64_t flops = 0;
    for (const TraceSpan& sp : spans) {
      if (sp.category != "gemm") continue;
      gemms.push_back(sp.name);
      flops += sp.flops;
      EXPECT_GE(sp.end_ms, sp.start_ms) << sp.name;
    }
    EXPECT_EQ(flops, 2 * 96 * c.n * c.other) << "the call's work: 96 rows";
    if (plan.path() == GroupedPath::kLoop) {
      EXPECT_EQ(gemms, (std::vector<std::string>{d.name + " group 0", d.name + " group 2",
                                                 d.name + " group 3"}));
    } else {
      EXPECT_EQ(gemms, std::vector<std::string>{d.name + " (cublaslt_tiles)"});
    }
  }
}

// Issues every call of `calls` (group sizes summing to c's M) on one plan of `c`, back to back
// into outputs of their own before one read, then checks each against the fp64 reference. On
// the CUDA backend the plan must run c.path and hand no call to the loop (every case here is
// aligned), so a runner that fell back would not pass for one that works.
void check_calls(const Case& c, const std::vector<std::vector<int32_t>>& calls) {
  SCOPED_TRACE(describe(c));
  const GroupedGemmDesc d = make_desc(c);
  GroupedGemmPlan plan(*g_ctx, d);
  ASSERT_EQ(plan.path(), g_cuda ? c.path : GroupedPath::kLoop);
  const auto g = static_cast<int64_t>(c.sizes.size());
  const auto lhs = random_values(num_elements(d.lhs_shape), c.dtype);
  const auto rhs = random_values(num_elements(d.rhs_shape), c.dtype);
  const auto bias = c.bias ? random_values(g * c.n, c.dtype) : std::vector<double>{};
  Buffer lhs_buf(lhs, c.dtype), rhs_buf(rhs, c.dtype);
  std::unique_ptr<Buffer> bias_buf;
  if (c.bias) bias_buf = std::make_unique<Buffer>(bias, c.dtype);
  const int64_t count = num_elements(plan.out_shape());
  std::vector<std::unique_ptr<Buffer>> outs;
  for (const auto& sizes : calls) {
    outs.push_back(std::make_unique<Buffer>(static_cast<size_t>(count) * dtype_size(c.dtype)));
    be().fill_nan(outs.back()->p, c.dtype, count);
    plan.execute(sizes, lhs_buf.p, rhs_buf.p, bias_buf ? bias_buf->p : nullptr, outs.back()->p);
  }
  EXPECT_EQ(plan.loop_fallbacks(), 0);
  for (size_t i = 0; i < calls.size(); ++i) {
    Case ci = c;
    ci.sizes = calls[i];
    SCOPED_TRACE("call " + std::to_string(i) + ": " + describe(ci));
    check_output(ci, lhs, rhs, bias, read_back(outs[i]->p, c.dtype, count));
  }
}

// More calls on one plan than it has staging slots, each with other sizes and its own
// output, issued back to back before one read: a slot rewritten while its copy is in flight
// would give a later call's pointers to an earlier GEMM (for the tiles, also another call's
// bias table rows).
TEST_F(GroupedPlan, CallsInFlight) {
  const std::vector<std::vector<int32_t>> calls = {
      {24, 24, 24, 24}, {65, 3, 0, 28},   {0, 0, 96, 0}, {96, 0, 0, 0},
      {0, 0, 0, 96},    {10, 20, 30, 36}, {1, 1, 1, 93}, {50, 0, 46, 0}};
  for (GroupedPath path : {GroupedPath::kCublasGrouped, GroupedPath::kCublasLtTiles}) {
    Case c;
    c.path = path;
    c.sizes = calls.front();
    c.bias = true;
    check_calls(c, calls);
  }
}

// The tiles' staging slot holds 28 bytes a tile (3 pointers and a group index) for
// max_row_tiles tiles: 3 for one group of 300 rows, an 84-byte slot. Unrounded, slot 1 would
// start 4 bytes past an 8-byte boundary and the device would read its pointer arrays
// misaligned; six calls use slots 0 to 3 and 0 to 1 again.
TEST_F(GroupedPlan, CublasLtTilesStagingSlotsStayAligned) {
  Case c;
  c.path = GroupedPath::kCublasLtTiles;
  c.sizes = {300};
  c.bias = true;
  check_calls(c, std::vector<std::vector<int32_t>>(6, c.sizes));
}

// Tile rows 16 bytes apart: N = 8 bf16 (16-byte output rows) and K = 40 (80-byte lhs rows),
// the overlapping tile of 257 rows at row 1: its lhs and out pointers are 16-byte aligned only,
// which the heuristic (256 bytes by default) must be told, since cuBLASLt cannot check the
// pointers of a pointer-array batch.
TEST_F(GroupedPlan, CublasLtTilesRowsAt16Bytes) {
  Case c;
  c.path = GroupedPath::kCublasLtTiles;
  c.n = 8;
  c.sizes = {257, 3};  // tiles 256 at rows 0 and 1, 2 at rows 257 and 258
  check_calls(c, {{257, 3}, {3, 257}, {129, 131}});
}

// The bias epilogue's pointer moves per tile class (each class's first row of the per-tile
// table): with N = 8 bf16 a table row is 16 bytes, so a class starting at table row 1 is only
// 16-byte aligned, while the heuristic must not assume the table base's 256 bytes.
TEST_F(GroupedPlan, CublasLtTilesBiasRowsAt16Bytes) {
  Case c;
  c.path = GroupedPath::kCublasLtTiles;
  c.n = 8;
  c.sizes = {256, 1, 2};  // classes 256 (table row 0), 2 (row 1), 1 (row 2)
  c.bias = true;
  check_calls(c, {{256, 1, 2}, {2, 1, 256}, {1, 256, 2}, {3, 254, 2}});
}

// Overlapping last tiles (two batch entries writing the same output rows) with a long K, where
// cuBLASLt's heuristic likes to split K: an in-place split-K reduction accumulates partial
// sums in the output itself, so two entries sharing rows would add into each other's partials.
TEST_F(GroupedPlan, CublasLtTilesOverlapWithLongK) {
  Case c;
  c.path = GroupedPath::kCublasLtTiles;
  c.other = 16384;
  c.n = 16;
  c.sizes = {3, 7, 13, 1};  // tiles 2 at rows 0 and 1, 4 at 0 and 3, 8 at 0 and 5, 1
  c.bias = true;
  check_calls(c, {{3, 7, 13, 1}, {13, 1, 3, 7}, {6, 6, 6, 6}});
}

// Where a CUDA runner does not run, a plan that asks for it is refused on the CUDA backend (no
// silent fallback), and kAuto runs the loop; the CPU backend runs the loop for all.
TEST_F(GroupedPlan, CudaPathRefusals) {
  const auto expect = [&](const Case& ci, const std::string& why) {
    const GroupedGemmDesc d = make_desc(ci);
    if (!g_cuda) {
      GroupedGemmPlan plan(*g_ctx, d);
      EXPECT_EQ(plan.path(), GroupedPath::kLoop) << describe(ci);
      return;
    }
    expect_plan_error<Error>(d, "grouped GEMM 'moe' (" + std::string(grouped_form_name(ci.form)) +
                                    "): path " + grouped_path_name(ci.path) +
                                    " does not run it: " + why + "; use path loop (or auto)");
    GroupedGemmDesc a = d;
    a.path = GroupedPath::kAuto;
    if (ci.dtype == DType::kFloat32 && ci.form == GroupedForm::kRaggedRows && ci.other > 0 &&
        !ci.out_dtype) {
      return;  // kAuto runs fp32 on the tiles
    }
    EXPECT_EQ(GroupedGemmPlan(*g_ctx, a).path(), GroupedPath::kLoop) << describe(ci);
  };
  for (GroupedPath path : {GroupedPath::kCublasGrouped, GroupedPath::kCublasLtTiles}) {
    Case c;
    c.sizes = {24, 24, 24, 24};
    c.path = path;
    if (path == GroupedPath::kCublasGrouped) {
      Case fp32 = c;
      fp32.dtype = DType::kFloat32;
      expect(fp32, "it runs bfloat16 and float16 only, not float32");
    }
    Case wide = c;
    wide.out_dtype = DType::kFloat32;
    expect(wide, "the output dtype float32 differs from the inputs' bfloat16");
    Case wgrad = c;
    wgrad.form = GroupedForm::kRaggedContracting;
    expect(wgrad, "it runs the ragged-rows form (forward, dgrad) only");
    Case empty_k = c;
    empty_k.other = 0;
    expect(empty_k, "K = 0 (an empty contraction, only the bias is written)");
  }
  // fp32 on the default path runs (the tiles on CUDA) and is right.
  Case fp32;
  fp32.sizes = {24, 24, 24, 24};
  fp32.dtype = DType::kFloat32;
  run_and_check(fp32);
  // kAuto by the groups' mean rows: 24 rows per group take the tiles on CUDA, 4096 and more
  // the loop; the CPU backend always loops.
  Case small;
  small.sizes = {24, 24, 24, 24};
  EXPECT_EQ(GroupedGemmPlan(*g_ctx, make_desc(small)).path(),
            g_cuda ? GroupedPath::kCublasLtTiles : GroupedPath::kLoop);
  Case large = small;
  large.sizes = {4096, 4096, 4096, 4096};
  large.other = 8;
  large.n = 8;
  EXPECT_EQ(GroupedGemmPlan(*g_ctx, make_desc(large)).path(), GroupedPath::kLoop);
}

// A plan moved into another object keeps its path (and on CUDA its handle and staging).
TEST_F(GroupedPlan, MovedPlanStillRuns) {
  for (GroupedPath path : {GroupedPath::kCublasGrouped, GroupedPath::kCublasLtTiles}) {
    Case c;
    c.sizes = {65, 3, 0, 28};
    c.path = path;
    c.bias = true;
    const GroupedGemmDesc d = make_desc(c);
    auto first = std::make_unique<GroupedGemmPlan>(*g_ctx, d);
    GroupedGemmPlan moved(std::move(*first));
    first.reset();
    EXPECT_EQ(moved.path(), g_cuda ? path : GroupedPath::kLoop);
    const auto lhs = random_values(num_elements(d.lhs_shape), c.dtype);
    const auto rhs = random_values(num_elements(d.rhs_shape), c.dtype);
    const auto bias = random_values(4 * c.n, c.dtype);
    Buffer lhs_buf(lhs, c.dtype), rhs_buf(rhs, c.dtype), bias_buf(bias, c.dtype);
    const int64_t count = num_elements(moved.out_shape());
    Buffer out(static_cast<size_t>(count) * dtype_size(c.dtype));
    be().fill_nan(out.p, c.dtype, count);
    moved.execute(c.sizes, lhs_buf.p, rhs_buf.p, bias_buf.p, out.p);
    SCOPED_TRACE(describe(c));
    check_output(c, lhs, rhs, bias, read_back(out.p, c.dtype, count));
  }
}

TEST(GroupedPathNames, Names) {
  EXPECT_STREQ(grouped_path_name(GroupedPath::kAuto), "auto");
  EXPECT_STREQ(grouped_path_name(GroupedPath::kLoop), "loop");
  EXPECT_STREQ(grouped_path_name(GroupedPath::kCublasGrouped), "cublas_grouped");
  EXPECT_STREQ(grouped_path_name(GroupedPath::kCublasLtTiles), "cublaslt_tiles");
}

}  // namespace
}  // namespace cgemm

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--backend=cuda") cgemm::g_cuda = true;
  }
  cgemm::g_seed = std::random_device{}();
  std::printf("seed %u, %s backend\n", cgemm::g_seed, cgemm::g_cuda ? "cuda" : "cpu");
  if (cgemm::g_cuda && !cgemm::cuda_backend_available()) {
    cgemm::g_no_backend = true;
    std::printf("no GPU: every case skips\n");
  } else {
    cgemm::g_ctx = std::make_unique<cgemm::Context>(
        MPI_COMM_WORLD, cgemm::MeshConfig{.dp = 1, .tp = 0},
        cgemm::g_cuda ? cgemm::BackendKind::kCuda : cgemm::BackendKind::kCpu,
        cgemm::OverlapOptions{});
  }
  const int rc = RUN_ALL_TESTS();
  cgemm::g_ctx.reset();
  MPI_Finalize();
  return rc;
}
