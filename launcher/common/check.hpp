#pragma once
// The check of an overlapped result against the sequential path.
// Rule (as Transformer Engine's tests): an element fails only if
// |out - ref| > atol AND |out - ref| > rtol * |ref|; a NaN or inf on either side fails.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"

namespace cgemm::launcher {

struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};

/// bf16: rtol 0.02 / atol 0.002; fp16: 1e-3 / 1e-6; fp32: 1e-5 / 1e-8.
Tolerance tolerance_for(DType t);

struct CheckStats {
  int64_t compared = 0;
  int64_t failures = 0;
  double max_abs = 0.0;   // max |out - ref| over finite pairs
  double max_rel = 0.0;   // max |out - ref| / |ref| over pairs with |ref| > atol
  int64_t nonfinite = 0;  // pairs with a NaN or an infinity on either side (each a failure)
  /// Folds another rank's stats in.
  void merge(const CheckStats& o);
};

/// FNV-1a 64 of `bytes` bytes: the report's checksum of an output shard, so two runs can be
/// compared bit for bit.
uint64_t checksum(const void* data, size_t bytes);
/// 16 lowercase hex digits.
std::string hex64(uint64_t v);

/// The `count` elements of dtype `dtype` at `data` (host memory) as floats: float32,
/// bfloat16, float16, float8_e4m3fn and float8_e5m2 (NaN, inf and subnormals kept). Throws
/// cgemm::Error for float4_e2m1fn.
std::vector<float> values_as_float(const void* data, DType dtype, int64_t count);

/// Compares `count` elements of dtype `dtype` (host memory; the dtypes of values_as_float).
CheckStats compare(const void* out, const void* ref, DType dtype, int64_t count, Tolerance tol);

}  // namespace cgemm::launcher
