#pragma once
// The shape logic of a grouped GEMM (one GEMM per expert group), as Transformer Engine's JAX
// gemm.py has it: the Python function grouped_gemm (with get_lhs_axis_boundary,
// get_rhs_axis_boundary, _can_use_v2_grouped_gemm and _should_enforce_v2_grouped_gemm),
// then GroupedGemmPrimitive.abstract (with _assert_grouped_gemm_dims_shapes and
// _compute_cublas_workspace_size) on the values it binds. Always with
// quantizer_set = noop_quantizer_set: the quantize-inside path is not reproduced.
//
// Shapes are element counts per dim, outermost first; sizes are element counts, workspaces
// bytes. gemm.py's integers are unbounded; here a result that does not fit in int64_t is an
// error (cgemm::Error) rather than a wrong number.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/sharding/scaling_mode.hpp"

namespace cgemm {

/// One operand: a GroupedNoScaleTensor (`scaled` false) or a GroupedScaledTensor1x (`scaled`
/// true; only this one is a ScaledTensor).
struct GroupedOperand {
  bool scaled = false;
  Shape original_shape;            // the N-D shape the sizes are taken from (data may be flattened)
  DType dtype = DType::kBFloat16;  // of the data
  // Lengths of first_dims / last_dims (the group sizes); 0 = None or empty. Only the length
  // matters to the shape logic.
  int64_t first_dims_size = 0;
  int64_t last_dims_size = 0;
  // Read only when `scaled`; a GroupedNoScaleTensor has an empty scale_inv.
  ScalingMode scaling_mode = ScalingMode::kNoScaling;
  DType dq_dtype = DType::kBFloat16;
  bool layout_is_t = false;  // data_layout == "T"
  int64_t scale_inv_size = 0;
};

struct GroupedGemmInput {
  GroupedOperand lhs, rhs;
  // Used as given: gemm.py never sanitizes them, so a negative or out-of-range dim is not
  // normalized (it only changes the layout test and the boundaries).
  std::vector<int64_t> lhs_contracting_dims, rhs_contracting_dims;
  std::optional<Shape> bias_shape;              // nullopt: bias is None
  std::optional<DType> preferred_element_type;  // nullopt: None
  bool group_offset_given = false;              // group_offset is not None
  int compute_capability = 90;                  // get_device_compute_capability(0)
  int64_t num_compute_streams = 4;              // num_cublas_streams
  bool v2_available = true;                     // _v2_grouped_gemm_available
  std::optional<std::string> enforce_v2_env;    // NVTE_JAX_ENFORCE_V2_GROUPED_GEMM; nullopt: unset
  int64_t setup_workspace_size = 0;             // get_grouped_gemm_setup_workspace_size(num_groups)
};

struct GroupedGemm {
  Shape out_shape;
  DType out_dtype = DType::kBFloat16;
  ScalingMode scaling_mode = ScalingMode::kNoScaling;
  bool lhs_is_trans = false, rhs_is_trans = false;     // as bound (after the Hopper adjustment)
  int64_t lhs_flatten_axis = 0, rhs_flatten_axis = 0;  // computed before that adjustment
  std::vector<int64_t> lhs_contracting_dims, rhs_contracting_dims;  // after it
  int64_t lhs_axis_boundary = 0, rhs_axis_boundary = 0;
  int64_t lhs_left_size = 0, lhs_right_size = 0, rhs_left_size = 0, rhs_right_size = 0;
  int64_t num_gemms = 0;  // equals the abstract's num_groups
  int64_t out_first_dims_size = 0, out_last_dims_size = 0;
  bool has_bias = false;
  bool use_v2_ffi = false;
  int64_t cublas_workspace_bytes = 0;            // 256 bytes of alignment padding included
  std::optional<int64_t> setup_workspace_bytes;  // only on the v2 (graph-safe) path
  std::optional<int64_t> int64_workspace_bytes;  // only on the v2 path
};

/// gemm.py's get_lhs_axis_boundary: max(cdims) + 1 when transposed, else min(cdims).
/// Throws PlanError for empty dims (Python's max of an empty sequence).
int64_t grouped_lhs_axis_boundary(const std::vector<int64_t>& cdims, bool is_transposed);
/// gemm.py's get_rhs_axis_boundary: min(cdims) when transposed, else max(cdims) + 1.
int64_t grouped_rhs_axis_boundary(const std::vector<int64_t>& cdims, bool is_transposed);

/// gemm.py's _should_enforce_v2_grouped_gemm: bool(int(value)), the value "0" when unset.
/// Python's int() of a str: surrounding whitespace, an optional sign, decimal digits (any
/// Unicode decimal digit) with single '_' between digits, at most 4300 digits (CPython's
/// default int_max_str_digits). Anything else throws PlanError (the seed's ValueError).
bool should_enforce_v2_grouped_gemm(const std::optional<std::string>& env);

/// gemm.py's _can_use_v2_grouped_gemm: the graph-safe path needs the v2 library, compute
/// capability >= 100, no scaling, bfloat16 lhs data and no bias. When `enforce` and the path
/// cannot be used, throws PlanError (the seed's RuntimeError).
bool can_use_v2_grouped_gemm(ScalingMode mode, DType lhs_dtype, bool has_bias, bool v2_available,
                             int compute_capability, bool enforce);

/// GroupedGemmPrimitive._compute_cublas_workspace_size: the per-stream base
/// (cublas_workspace_bytes) times 1 on the v2 path else num_compute_streams, plus 256 of
/// alignment padding, plus 16 bytes per scale-inverse element for tensor scaling, or each
/// scale-inverse size + 256 for MXFP8 (nothing for NVFP4 or no scaling).
int64_t grouped_cublas_workspace_bytes(ScalingMode mode, int64_t lhs_scale_inv_size,
                                       int64_t rhs_scale_inv_size, bool use_v2_ffi,
                                       int compute_capability, int64_t num_compute_streams);

/// grouped_gemm then GroupedGemmPrimitive.abstract. Throws PlanError wherever gemm.py
/// raises:
/// - both operands scaled with different scaling modes (ValueError);
/// - an empty contracting-dims list (IndexError on cd[-1]);
/// - both data dtypes float8_e5m2 (ValueError);
/// - tensor scaling below compute capability 100 (is_fp8_gemm_with_all_layouts_supported,
///   taken as cc >= 100 as the case contract says): an operand that is not scaled
///   (UnboundLocalError on lhs_q), or a layout that does not match the transposes
///   (RuntimeError); the remap of the dims modulo ndim (or rhs ndim - 1) by zero
///   (ZeroDivisionError);
/// - no non-empty group-size array (ValueError);
/// - a transposed rhs whose boundary indexes past its shape (IndexError);
/// - a bias whose shape is not (num_gemms, prod(rhs non-contracting)) (assert);
/// - group_offset given (RuntimeError);
/// - the v2 environment value or enforcement (see above);
/// - a non-empty dims array whose length is not num_groups
///   (_assert_grouped_gemm_dims_shapes' assert).
GroupedGemm grouped_gemm(const GroupedGemmInput& in);

}  // namespace cgemm
