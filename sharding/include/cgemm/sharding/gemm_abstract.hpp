#pragma once
// Shape and dtype validation of a GEMM and its output shape and workspace size, as
// Transformer Engine's GemmPrimitive.abstract (gemm.py) with sanitize_dims,
// _get_gemm_layout, assert_cublas_requirements, _compatible_fp8_gemm_dtypes and
// get_cublas_workspace_size_bytes.

#include <optional>

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

/// Throws PlanError whenever gemm.py raises.
GemmAbstract gemm_abstract(const GemmAbstractInput& in);

}  // namespace cgemm
