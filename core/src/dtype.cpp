#include "cgemm/core/dtype.hpp"

#include <array>
#include <string>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

// float4_e2m1fn counts 1 byte because numpy's itemsize for ml_dtypes' float4 is 1, and
// gemm.py's "8-bit output" check reads itemsize.
constexpr std::array<DTypeInfo, 6> kDTypes{{
    {DType::kFloat32, "float32", 4},
    {DType::kBFloat16, "bfloat16", 2},
    {DType::kFloat16, "float16", 2},
    {DType::kFloat8E4M3, "float8_e4m3fn", 1},
    {DType::kFloat8E5M2, "float8_e5m2", 1},
    {DType::kFloat4E2M1, "float4_e2m1fn", 1},
}};

constexpr std::array<std::pair<std::string_view, DType>, 3> kDTypeShortNames{{
    {"fp32", DType::kFloat32},
    {"bf16", DType::kBFloat16},
    {"fp16", DType::kFloat16},
}};

}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& d : kDTypes) {
    if (d.type == t) return d.name;
  }
  return "unknown";
}

DType parse_dtype(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (d.name == name) return d.type;
  }
  for (const auto& [short_name, type] : kDTypeShortNames) {
    if (short_name == name) return type;
  }
  std::string known;
  for (const auto& d : kDTypes) {
    if (!known.empty()) known += ", ";
    known += d.name;
  }
  throw Error("unknown dtype '" + std::string(name) + "' (known: " + known +
              ", and the short forms fp32, bf16, fp16)");
}

size_t dtype_size(DType t) {
  for (const auto& d : kDTypes) {
    if (d.type == t) return d.size;
  }
  return 0;
}

bool is_fp8(DType t) { return t == DType::kFloat8E4M3 || t == DType::kFloat8E5M2; }

}  // namespace cgemm
