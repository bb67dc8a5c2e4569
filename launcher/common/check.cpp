#include "check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/float8.hpp"

namespace cgemm::launcher {

Tolerance tolerance_for(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return {0.02, 0.002};
    case DType::kFloat16:
      return {1e-3, 1e-6};
    case DType::kFloat32:
      return {1e-5, 1e-8};
    default:
      // FP8: rtol 0.125 / atol 0.625.
      return {0.125, 0.625};
  }
}

void CheckStats::merge(const CheckStats& o) {
  compared += o.compared;
  failures += o.failures;
  max_abs = std::max(max_abs, o.max_abs);
  max_rel = std::max(max_rel, o.max_rel);
  nonfinite += o.nonfinite;
}

uint64_t checksum(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kHex[v & 15];
  return s;
}

std::vector<float> values_as_float(const void* data, DType dtype, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  const auto* bytes = static_cast<const uint8_t*>(data);
  // The FP8 dtypes are decoded here (core/float8.hpp's codecs), not in convert_to_float:
  // quantized data is not a plain dtype for the backends, which must keep refusing it there.
  switch (dtype) {
    case DType::kFloat8E4M3:
      std::transform(bytes, bytes + count, v.begin(), numeric::e4m3_to_float);
      break;
    case DType::kFloat8E5M2:
      std::transform(bytes, bytes + count, v.begin(), numeric::e5m2_to_float);
      break;
    case DType::kFloat4E2M1:
      throw Error("dtype float4_e2m1fn cannot be compared: its packing in memory is not defined");
    default:
      convert_to_float(data, dtype, v.data(), count);
  }
  return v;
}

CheckStats compare(const void* out, const void* ref, DType dtype, int64_t count, Tolerance tol) {
  const std::vector<float> a = values_as_float(out, dtype, count);
  const std::vector<float> b = values_as_float(ref, dtype, count);
  CheckStats s;
  s.compared = count;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], r = b[i];
    if (!std::isfinite(x) || !std::isfinite(r)) {
      ++s.failures;
      ++s.nonfinite;
      continue;
    }
    const double diff = std::fabs(x - r);
    s.max_abs = std::max(s.max_abs, diff);
    if (std::fabs(r) > tol.atol) s.max_rel = std::max(s.max_rel, diff / std::fabs(r));
    if (diff > tol.atol && diff > tol.rtol * std::fabs(r)) ++s.failures;
  }
  return s;
}

}  // namespace cgemm::launcher
