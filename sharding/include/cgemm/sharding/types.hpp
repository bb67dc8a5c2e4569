#pragma once
// The shared vocabulary of cgemm: element types, collective kinds, scaling modes and
// the error type every layer throws. Lives in sharding/ because that is the lowest,
// dependency-free layer (no MPI, no CUDA); every other layer includes it.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace cgemm {

/// Every failure in cgemm is a cgemm::Error (or derived): the message names the operand,
/// the shapes and the axis involved.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A rule of Transformer Engine's gemm.py was violated (its ValueError/assert/RuntimeError).
class PlanError : public Error {
 public:
  using Error::Error;
};

using Shape = std::vector<int64_t>;

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

/// The collective fused with a GEMM (Transformer Engine's CollectiveOp).
enum class CollectiveOp { kNone, kAllGather, kReduceScatter };
std::string_view collective_name(CollectiveOp op);  // "none", "all_gather", "reduce_scatter"
CollectiveOp parse_collective(std::string_view name);

/// Transformer Engine's ScalingMode; predicates as in gemm.py's ScalingMode methods.
enum class ScalingMode {
  kNoScaling,
  kDelayedTensorScaling,
  kCurrentTensorScaling,
  kMxfp8_1d,
  kNvfp4_1d,
  kNvfp4_2d
};
std::string_view scaling_mode_name(ScalingMode m);  // "no_scaling", "delayed_tensor_scaling", ...
ScalingMode parse_scaling_mode(std::string_view name);
bool is_tensor_scaling(ScalingMode m);    // delayed or current
bool is_nvfp4(ScalingMode m);             // nvfp4_1d or nvfp4_2d
bool is_1d_block_scaling(ScalingMode m);  // mxfp8_1d, nvfp4_1d, nvfp4_2d
bool is_mxfp8(ScalingMode m);             // mxfp8_1d

int64_t num_elements(const Shape& s);
std::string shape_str(const Shape& s);  // "[4, 8192, 4096]"

}  // namespace cgemm
