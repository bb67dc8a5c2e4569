#include "cgemm/gemm/cpu_gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/float8.hpp"

// OpenBLAS's thread control; weak so another CBLAS still links (then it is not called).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace cgemm {

void set_blas_threads(int threads) {
  if (openblas_set_num_threads != nullptr) openblas_set_num_threads(threads);
}

namespace {

// Copies a [rows, cols] block with row stride ld (elements) into a dense fp64 matrix.
void load_block(const void* src, DType dtype, int64_t rows, int64_t cols, int64_t ld,
                std::vector<double>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  const size_t esize = dtype_size(dtype);
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_float(static_cast<const char*>(src) + static_cast<size_t>(r * ld) * esize, dtype,
                     row.data(), cols);
    std::copy(row.begin(), row.end(), dst.begin() + r * cols);
  }
}

// The same for quantized data: each element decoded (FP4: two a byte, the lower index in the
// low nibble) and multiplied by its block's scale, `scales` [rows, cols / block] (block 0: no
// block scales). Exact in fp64: an FP8 value times a power of two or an E4M3 scale.
void load_quantized(const void* src, DType dtype, int64_t rows, int64_t cols, int64_t ld,
                    const uint8_t* scales, BlockScaling scaling, std::vector<double>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  const auto* bytes = static_cast<const uint8_t*>(src);
  const int block = scales != nullptr ? block_size(scaling) : 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t e = r * ld + c;
      uint8_t code = 0;
      if (dtype == DType::kFloat4E2M1) {
        code = static_cast<uint8_t>((bytes[e / 2] >> ((e & 1) * 4)) & 0xfu);
      } else {
        code = bytes[e];
      }
      double v = numeric::narrow_to_float(code, dtype);
      if (block > 0) {
        const uint8_t sb = scales[r * (cols / block) + c / block];
        v *= scaling == BlockScaling::kMxfp8 ? numeric::e8m0_to_float(sb)
                                             : numeric::e4m3_to_float(sb);
      }
      dst[static_cast<size_t>(r * cols + c)] = v;
    }
  }
}

void load_operand(const void* src, DType dtype, int64_t rows, int64_t cols, int64_t ld,
                  const uint8_t* scales, BlockScaling scaling, std::vector<double>& dst) {
  if (is_fp8(dtype) || dtype == DType::kFloat4E2M1) {
    load_quantized(src, dtype, rows, cols, ld, scales, scaling, dst);
  } else {
    load_block(src, dtype, rows, cols, ld, dst);
  }
}

std::string task_str(const GemmTask& t) {
  std::string s = "m=" + std::to_string(t.m) + " n=" + std::to_string(t.n) +
                  " k=" + std::to_string(t.k) + " lda=" + std::to_string(t.lda) +
                  " ldb=" + std::to_string(t.ldb) + " ldc=" + std::to_string(t.ldc) +
                  " batch=" + std::to_string(t.batch);
  if (t.lhs_transposed) s += " (lhs [k, m])";
  return s;
}

}  // namespace

void cpu_gemm(const GemmTask& t) {
  // Stored shapes: lhs [m, k] or [k, m], rhs [k, n] or [n, k] (row-major).
  const int64_t lhs_rows = t.lhs_transposed ? t.k : t.m;
  const int64_t lhs_cols = t.lhs_transposed ? t.m : t.k;
  const int64_t rhs_rows = t.rhs_transposed ? t.n : t.k;
  const int64_t rhs_cols = t.rhs_transposed ? t.k : t.n;
  if (t.m < 0 || t.n < 0 || t.k < 0 || t.batch < 1 || t.lda < lhs_cols || t.ldc < t.n ||
      t.ldb < rhs_cols) {
    throw Error("cpu_gemm: inconsistent GEMM " + task_str(t));
  }
  if (t.m == 0 || t.n == 0) return;
  // fp64 operands and accumulation: products of fp32/bf16/fp16 values are exact in fp64 and
  // the sum is rounded once to the output, so a row's result does not depend on how the rows
  // were split into calls (the reference path and the chunked schedule agree bit for bit,
  // but for rare double-rounding ties). thread_local: buffers are reused across calls.
  thread_local std::vector<double> a, b, c;
  thread_local std::vector<float> bias, row;
  load_operand(t.rhs, t.rhs_type(), rhs_rows, rhs_cols, t.ldb, t.rhs_block_scale, t.block_scaling,
               b);
  // Quantized inputs: the tensor scale_invs multiply alpha (as cuBLASLt's A/B scale pointers).
  double alpha = t.alpha;
  if (t.lhs_scale_inv != nullptr) alpha *= static_cast<double>(*t.lhs_scale_inv);
  if (t.rhs_scale_inv != nullptr) alpha *= static_cast<double>(*t.rhs_scale_inv);
  const int block = block_size(t.block_scaling);
  if (t.bias != nullptr) {
    bias.resize(static_cast<size_t>(t.n));
    convert_to_float(t.bias, t.out_dtype, bias.data(), t.n);
  }
  const size_t in_size = dtype_size(t.in_dtype);
  const size_t out_size = dtype_size(t.out_dtype);
  for (int64_t bi = 0; bi < t.batch; ++bi) {
    const char* lhs =
        static_cast<const char*>(t.lhs) + static_cast<size_t>(bi * t.lhs_batch_stride) * in_size;
    char* out = static_cast<char*>(t.out) + static_cast<size_t>(bi * t.out_batch_stride) * out_size;
    const uint8_t* lhs_scales = t.lhs_block_scale != nullptr && block > 0
                                    ? t.lhs_block_scale + bi * t.lhs_batch_stride / block
                                    : nullptr;
    load_operand(lhs, t.in_dtype, lhs_rows, lhs_cols, t.lda, lhs_scales, t.block_scaling, a);
    // beta == 0 never reads out (it may hold NaN); else its values are accumulated into.
    c.assign(static_cast<size_t>(t.m * t.n), 0.0f);
    if (t.beta != 0.0f) load_block(out, t.out_dtype, t.m, t.n, t.ldc, c);
    if (t.k > 0) {
      cblas_dgemm(CblasRowMajor, t.lhs_transposed ? CblasTrans : CblasNoTrans,
                  t.rhs_transposed ? CblasTrans : CblasNoTrans, static_cast<int>(t.m),
                  static_cast<int>(t.n), static_cast<int>(t.k), alpha, a.data(),
                  static_cast<int>(lhs_cols), b.data(), static_cast<int>(rhs_cols), t.beta,
                  c.data(), static_cast<int>(t.n));
    } else {
      for (double& v : c) v *= t.beta;
    }
    row.resize(static_cast<size_t>(t.n));
    for (int64_t r = 0; r < t.m; ++r) {
      const double* acc = c.data() + r * t.n;
      for (int64_t j = 0; j < t.n; ++j) {
        // Bias added to the fp32 accumulator, as the cuBLASLt bias epilogue does.
        row[static_cast<size_t>(j)] = static_cast<float>(acc[j]);
        if (t.bias != nullptr) row[static_cast<size_t>(j)] += bias[static_cast<size_t>(j)];
      }
      convert_from_float(row.data(), out + static_cast<size_t>(r * t.ldc) * out_size, t.out_dtype,
                         t.n);
    }
  }
}

}  // namespace cgemm
