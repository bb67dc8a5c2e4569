#pragma once
// Shape and dtype validation of a GEMM and its output shape and workspace size, as
// Transformer Engine's GemmPrimitive.abstract (gemm.py) with sanitize_dims,
// _get_gemm_layout, assert_cublas_requirements, _compatible_fp8_gemm_dtypes and
// get_cublas_workspace_size_bytes.

#include <optional>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"

namespace cgemm {

struct TensorDesc {
  Shape shape;
  DType dtype = DType::kFloat32;
};

struct GemmAbstractInput {
  TensorDesc lhs, rhs;
  Shape lhs_scale_shape{0}, rhs_scale_shape{0};  // only the element count matters
  std::optional<TensorDesc> bias;                // nullopt: empty bias of out_dtype
  int64_t alpha_size = 1, beta_size = 1;
  DType alpha_dtype = DType::kFloat32, beta_dtype = DType::kFloat32;
  DType out_dtype = DType::kFloat32;
  ContractingDims contracting_dims;
  ScalingMode scaling_mode = ScalingMode::kNoScaling;
  CollectiveOp collective_op = CollectiveOp::kNone;
  bool is_outer = false;
  int sequence_dim = 1;
  int tpsp_size = 1;
  int compute_capability = 90;  // e.g. 90 for Hopper
  int num_max_streams = 3;
};

struct GemmAbstract {
  Shape out_shape;  // includes the overlap adjustment of the inner (not outer) collective case
  DType out_dtype = DType::kFloat32;
  int64_t workspace_bytes = 0;  // cuBLAS workspace, 256 bytes of alignment padding included
};

/// Base cuBLAS workspace per stream in bytes: 32 MiB on compute capability >= 9.0, else 4 MiB
/// (gemm.py's get_cublas_workspace_size_bytes).
int64_t cublas_workspace_bytes(int compute_capability);

/// Transformer Engine's is_fp8_gemm_with_all_layouts_supported (quantize/helper.py):
/// 10.0 <= compute capability < 12.0. Below it, tensor-scaled and NVFP4 GEMMs need the NT
/// layout (lhs not transposed, rhs transposed).
bool is_fp8_gemm_with_all_layouts_supported(int compute_capability);

/// Throws PlanError whenever gemm.py raises: non-consecutive or empty contracting dims,
/// mismatched contracting sizes, cuBLAS alignment (assert_cublas_requirements), FP8 dtype
/// pairs (_compatible_fp8_gemm_dtypes), missing scales, the NT layout below SM100
/// (_get_gemm_layout), 8-bit outputs, the inner collective's sequence dim and bf16 output,
/// bias shape/dtype, alpha/beta.
GemmAbstract gemm_abstract(const GemmAbstractInput& in);

}  // namespace cgemm
