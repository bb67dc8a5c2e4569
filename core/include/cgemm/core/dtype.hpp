#pragma once
// Element types, named as in JAX/numpy. Kept C++17 so CUDA sources can include it.

#include <cstddef>
#include <string_view>

namespace cgemm {

/// Element types, named as in JAX/numpy (`float32`, `bfloat16`, ...).
enum class DType { kFloat32, kBFloat16, kFloat16, kFloat8E4M3, kFloat8E5M2, kFloat4E2M1 };

/// Name as in the planner's JSON cases ("bfloat16", ...).
std::string_view dtype_name(DType t);
/// Parses "float32"/"bfloat16"/"float16"/"float8_e4m3fn"/"float8_e5m2"/"float4_e2m1fn";
/// also the short forms "fp32"/"bf16"/"fp16". Throws cgemm::Error naming the value.
DType parse_dtype(std::string_view name);
/// Bytes per element as gemm.py counts them (float4_e2m1fn counts 1).
size_t dtype_size(DType t);
bool is_fp8(DType t);

}  // namespace cgemm
