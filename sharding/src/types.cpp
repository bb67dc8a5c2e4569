#include "cgemm/sharding/types.hpp"

#include <array>
#include <string>
#include <utility>

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

constexpr std::array<std::pair<CollectiveOp, std::string_view>, 3> kCollectives{{
    {CollectiveOp::kNone, "none"},
    {CollectiveOp::kAllGather, "all_gather"},
    {CollectiveOp::kReduceScatter, "reduce_scatter"},
}};

constexpr std::array<std::pair<ScalingMode, std::string_view>, 6> kScalingModes{{
    {ScalingMode::kNoScaling, "no_scaling"},
    {ScalingMode::kDelayedTensorScaling, "delayed_tensor_scaling"},
    {ScalingMode::kCurrentTensorScaling, "current_tensor_scaling"},
    {ScalingMode::kMxfp8_1d, "mxfp8_1d_scaling"},
    {ScalingMode::kNvfp4_1d, "nvfp4_1d_scaling"},
    {ScalingMode::kNvfp4_2d, "nvfp4_2d_scaling"},
}};

// Both tables map enum -> name, so the name is always the second member.
template <typename Table>
std::string known_names(const Table& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += ", ";
    out += entry.second;
  }
  return out;
}

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

std::string_view collective_name(CollectiveOp op) {
  for (const auto& [o, name] : kCollectives) {
    if (o == op) return name;
  }
  return "unknown";
}

CollectiveOp parse_collective(std::string_view name) {
  for (const auto& [o, n] : kCollectives) {
    if (n == name) return o;
  }
  throw Error("unknown collective '" + std::string(name) +
              "' (known: " + known_names(kCollectives) + ")");
}

std::string_view scaling_mode_name(ScalingMode m) {
  for (const auto& [mode, name] : kScalingModes) {
    if (mode == m) return name;
  }
  return "unknown";
}

ScalingMode parse_scaling_mode(std::string_view name) {
  for (const auto& [mode, n] : kScalingModes) {
    if (n == name) return mode;
  }
  throw Error("unknown scaling_mode '" + std::string(name) +
              "' (known: " + known_names(kScalingModes) + ")");
}

bool is_tensor_scaling(ScalingMode m) {
  return m == ScalingMode::kDelayedTensorScaling || m == ScalingMode::kCurrentTensorScaling;
}

bool is_nvfp4(ScalingMode m) { return m == ScalingMode::kNvfp4_1d || m == ScalingMode::kNvfp4_2d; }

// Transformer Engine counts NVFP4 2D as 1D block scaling too (its scale-inverse layout is
// per-row blocks), so the 2D mode shards its scales like the operand.
bool is_1d_block_scaling(ScalingMode m) { return m == ScalingMode::kMxfp8_1d || is_nvfp4(m); }

bool is_mxfp8(ScalingMode m) { return m == ScalingMode::kMxfp8_1d; }

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace cgemm
