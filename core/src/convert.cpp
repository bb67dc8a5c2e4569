#include "cgemm/core/convert.hpp"

#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

void convert_to_float(const void* src, DType dtype, float* dst, int64_t count) {
  switch (dtype) {
    case DType::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      return;
    case DType::kBFloat16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < count; ++i) dst[i] = numeric::bf16_to_float(s[i]);
      return;
    }
    case DType::kFloat16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < count; ++i) dst[i] = numeric::fp16_to_float(s[i]);
      return;
    }
    default:
      throw Error("CPU backend: dtype " + std::string(dtype_name(dtype)) + " is not supported");
  }
}

void convert_from_float(const float* src, void* dst, DType dtype, int64_t count) {
  switch (dtype) {
    case DType::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(float));
      return;
    case DType::kBFloat16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < count; ++i) d[i] = numeric::float_to_bf16(src[i]);
      return;
    }
    case DType::kFloat16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < count; ++i) d[i] = numeric::float_to_fp16(src[i]);
      return;
    }
    default:
      throw Error("CPU backend: dtype " + std::string(dtype_name(dtype)) + " is not supported");
  }
}

}  // namespace cgemm
