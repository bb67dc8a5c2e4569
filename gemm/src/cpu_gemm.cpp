#include "cgemm/gemm/cpu_gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"

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
  load_block(t.rhs, t.in_dtype, rhs_rows, rhs_cols, t.ldb, b);
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
    load_block(lhs, t.in_dtype, lhs_rows, lhs_cols, t.lda, a);
    // beta == 0 never reads out (it may hold NaN); else its values are accumulated into.
    c.assign(static_cast<size_t>(t.m * t.n), 0.0f);
    if (t.beta != 0.0f) load_block(out, t.out_dtype, t.m, t.n, t.ldc, c);
    if (t.k > 0) {
      cblas_dgemm(CblasRowMajor, t.lhs_transposed ? CblasTrans : CblasNoTrans,
                  t.rhs_transposed ? CblasTrans : CblasNoTrans, static_cast<int>(t.m),
                  static_cast<int>(t.n), static_cast<int>(t.k), t.alpha, a.data(),
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
