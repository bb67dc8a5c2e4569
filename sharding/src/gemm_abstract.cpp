#include "cgemm/sharding/gemm_abstract.hpp"

#include <algorithm>
#include <string>

#include "cgemm/sharding/dims.hpp"
#include "py_index.hpp"

namespace cgemm {

namespace {

using detail::py_at;

bool dims_are_consecutive(std::vector<int64_t> dims) {
  if (dims.size() <= 1) return true;
  std::sort(dims.begin(), dims.end());
  // sorted(dims) == list(range(min, max + 1)): a repeated dim makes the lengths differ.
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] != dims[0] + static_cast<int64_t>(i)) return false;
  }
  return true;
}

// reduce(operator.mul, [shape[d] for d in dims]) has no initial value, so an empty list of
// contracting dims raises (TypeError) rather than giving 1.
int64_t contracting_size(const Shape& shape, const std::vector<int64_t>& dims,
                         const std::string& what) {
  if (dims.empty()) {
    throw PlanError("cuBLAS GEMM needs at least one contracting dimension for the " + what +
                    " operand of shape " + shape_str(shape) + " (gemm.py reduces an empty list)");
  }
  int64_t size = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(size, py_at(shape, d, what + " contracting dims"), &size)) {
      throw PlanError(what + " contracting size of shape " + shape_str(shape) +
                      " overflows 64 bits");
    }
  }
  return size;
}

// gemm.py's assert_cublas_requirements.
void check_cublas_alignment(ScalingMode mode, int64_t contracting_size, const std::string& name) {
  if (!is_quantized(mode)) return;
  const int64_t alignment = scaling_mode_row(mode).contracting_alignment;
  if (contracting_size % alignment != 0) {
    throw PlanError(
        "cuBLAS GEMM " + name + " tensor's contracting dimension must be a multiple of " +
        std::to_string(alignment) +
        " when using quantized inputs. Got contracting_size=" + std::to_string(contracting_size));
  }
}

// gemm.py's _compatible_fp8_gemm_dtypes: (e4m3 x e4m3), (e4m3 x e5m2), (e5m2 x e4m3).
bool compatible_fp8_gemm_dtypes(DType lhs, DType rhs) {
  const bool lhs_fp8 = lhs == DType::kFloat8E4M3 || lhs == DType::kFloat8E5M2;
  const bool rhs_fp8 = rhs == DType::kFloat8E4M3 || rhs == DType::kFloat8E5M2;
  return (lhs == DType::kFloat8E4M3 && rhs_fp8) || (lhs_fp8 && rhs == DType::kFloat8E4M3);
}

Shape non_contracting_shape(const Shape& shape, const std::vector<int64_t>& cdims) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (std::find(cdims.begin(), cdims.end(), static_cast<int64_t>(d)) == cdims.end()) {
      out.push_back(shape[d]);
    }
  }
  return out;
}

std::string name(DType t) { return std::string(dtype_name(t)); }

}  // namespace

int64_t cublas_workspace_bytes(int compute_capability) {
  return compute_capability >= 90 ? 33'554'432 : 4'194'304;
}

bool is_fp8_gemm_with_all_layouts_supported(int compute_capability) {
  return compute_capability >= 100 && compute_capability < 120;
}

GemmAbstract gemm_abstract(const GemmAbstractInput& in) {
  const Shape& lhs_shape = in.lhs.shape;
  const Shape& rhs_shape = in.rhs.shape;
  const auto lhs_ndim = static_cast<int64_t>(lhs_shape.size());
  const auto rhs_ndim = static_cast<int64_t>(rhs_shape.size());
  const auto lhs_cdims = sanitize_dims(lhs_ndim, in.contracting_dims.first);
  const auto rhs_cdims = sanitize_dims(rhs_ndim, in.contracting_dims.second);

  if (!dims_are_consecutive(lhs_cdims)) {
    throw PlanError(
        "cuBLAS GEMM expected consecutive contracting dimensions for LHS operand, but got " +
        dims_str(lhs_cdims) + ".");
  }
  if (!dims_are_consecutive(rhs_cdims)) {
    throw PlanError(
        "cuBLAS GEMM expected consecutive contracting dimensions for RHS operand, but got " +
        dims_str(rhs_cdims) + ".");
  }

  const int64_t lhs_csize = contracting_size(lhs_shape, lhs_cdims, "LHS");
  const int64_t rhs_csize = contracting_size(rhs_shape, rhs_cdims, "RHS");
  if (lhs_csize != rhs_csize) {
    throw PlanError("cuBLAS GEMM operands have incompatible contracting dimensions: " +
                    shape_str(lhs_shape) + " @ idx " + dims_str(lhs_cdims) + " X " +
                    shape_str(rhs_shape) + " @ idx " + dims_str(rhs_cdims) + ".");
  }
  check_cublas_alignment(in.scaling_mode, lhs_csize, "LHS");
  check_cublas_alignment(in.scaling_mode, rhs_csize, "RHS");

  const GemmLayout layout = gemm_layout(lhs_ndim, rhs_ndim, in.contracting_dims);
  const int64_t lhs_scale_size = num_elements(in.lhs_scale_shape);
  const int64_t rhs_scale_size = num_elements(in.rhs_scale_shape);
  if (in.scaling_mode != ScalingMode::kNoScaling) {
    // NVFP4 skips the FP8 dtype-pair check...
    if (!(is_nvfp4(in.scaling_mode) || compatible_fp8_gemm_dtypes(in.lhs.dtype, in.rhs.dtype))) {
      throw PlanError("cuBLAS GEMM quantized operands have incompatible data types: " +
                      name(in.lhs.dtype) + " x " + name(in.rhs.dtype) + ".");
    }
    if (!(lhs_scale_size > 0 && rhs_scale_size > 0)) {
      throw PlanError("Quantized cuBLAS GEMM requires inverse scaling factors for both operands.");
    }
    // ...but only MXFP8 is exempt from the NT-layout requirement below compute capability 10.0.
    if (scaling_mode_row(in.scaling_mode).nt_layout_below_sm100 &&
        !is_fp8_gemm_with_all_layouts_supported(in.compute_capability)) {
      if (layout.lhs_transposed || !layout.rhs_transposed) {
        throw PlanError(
            "cuBLAS FP8 GEMM on devices with compute capability < 10.0 (Hopper) require "
            "non-transposed LHS and transposed RHS operands (`contracting_dims=((-1, ), (-1, "
            "))`); got compute capability " +
            std::to_string(in.compute_capability) + ", lhs " + shape_str(lhs_shape) +
            " contracting " + dims_str(lhs_cdims) + ", rhs " + shape_str(rhs_shape) +
            " contracting " + dims_str(rhs_cdims) + ".");
      }
    }
  } else if (in.lhs.dtype != in.rhs.dtype) {
    throw PlanError(
        "For TE cuBLAS GEMM for non-quantized inputs, the operand dtypes must be equal. LHS "
        "dtype != RHS dtype, lhs.dtype=" +
        name(in.lhs.dtype) + ", rhs.dtype=" + name(in.rhs.dtype));
  }

  if (!(dtype_size(in.out_dtype) > 1)) {
    throw PlanError("cuBLAS GEMM custom op does not support 8-bit quantized output types (got " +
                    name(in.out_dtype) + ").");
  }
  const Shape lhs_non_contracting = non_contracting_shape(lhs_shape, lhs_cdims);
  const Shape rhs_non_contracting = non_contracting_shape(rhs_shape, rhs_cdims);
  GemmAbstract result;
  result.out_shape = lhs_non_contracting;
  result.out_shape.insert(result.out_shape.end(), rhs_non_contracting.begin(),
                          rhs_non_contracting.end());
  result.out_dtype = in.out_dtype;

  // The inner (per-device) GEMM of a collective GEMM produces the gathered or scattered
  // sequence: dim 1, whatever sequence_dim says, after checking it is 1.
  if (in.collective_op != CollectiveOp::kNone && !in.is_outer) {
    if (in.sequence_dim != 1) {
      throw PlanError("Invalid sequence_dim. Got sequence_dim=" + std::to_string(in.sequence_dim));
    }
    if (result.out_shape.size() < 2) {
      throw PlanError("the " + std::string(collective_name(in.collective_op)) +
                      " overlap adjusts output dim 1, but the output shape " +
                      shape_str(result.out_shape) + " has fewer than 2 dims");
    }
    if (in.collective_op == CollectiveOp::kAllGather) {
      result.out_shape[1] =
          checked_mul(result.out_shape[1], in.tpsp_size, "all-gather overlap output dim 1");
    } else {
      if (in.tpsp_size == 0) {
        throw PlanError("reduce-scatter overlap divides output dim 1 by tpsp_size=0");
      }
      // Python's floor division.
      const int64_t q = result.out_shape[1] / in.tpsp_size;
      result.out_shape[1] = (result.out_shape[1] % in.tpsp_size != 0 &&
                             ((result.out_shape[1] < 0) != (in.tpsp_size < 0)))
                                ? q - 1
                                : q;
    }
    if (in.out_dtype != DType::kBFloat16) {
      throw PlanError("Unsupported out_dtype=" + name(in.out_dtype) +
                      " for a collective GEMM (only bfloat16)");
    }
  }

  // A bias with no elements is no bias: gemm.py only validates when bias.size > 0.
  if (in.bias && num_elements(in.bias->shape) > 0) {
    if (in.bias->shape != rhs_non_contracting) {
      throw PlanError("cuBLAS GEMM bias tensor has incorrect shape, expected (" +
                      shape_str(rhs_non_contracting) + ", ) but found " +
                      shape_str(in.bias->shape) + ".");
    }
    if (in.bias->dtype != in.out_dtype) {
      throw PlanError("cuBLAS GEMM bias tensor has incorrect data type, expected " +
                      name(in.out_dtype) + " but found " + name(in.bias->dtype) + ".");
    }
  }

  if (in.alpha_size != 1 || in.alpha_dtype != DType::kFloat32) {
    throw PlanError("Expected alpha to be a single float32 scalar, but got alpha.size=" +
                    std::to_string(in.alpha_size) + ", alpha.dtype=" + name(in.alpha_dtype));
  }
  if (in.beta_size != 1 || in.beta_dtype != DType::kFloat32) {
    throw PlanError("Expected beta to be a single float32 scalar, but got beta.size=" +
                    std::to_string(in.beta_size) + ", beta.dtype=" + name(in.beta_dtype));
  }

  int64_t workspace = cublas_workspace_bytes(in.compute_capability);
  // NVFP4 scales are swizzled by a kernel into the workspace rather than by JAX transposes.
  const std::string what = "cuBLAS workspace";
  if (is_nvfp4(in.scaling_mode)) {
    workspace = checked_add(workspace, checked_add(lhs_scale_size, rhs_scale_size, what), what);
  }
  // Every stream of a collective GEMM gets its own cuBLAS workspace.
  if (in.collective_op != CollectiveOp::kNone) {
    workspace = checked_mul(workspace, in.num_max_streams, what);
  }
  // cuBLAS wants a 256-byte aligned pointer and JAX buffers need not be.
  workspace = checked_add(workspace, 256, what);
  result.workspace_bytes = workspace;
  return result;
}

}  // namespace cgemm
