#include "cgemm/sharding/grouped_gemm.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "cgemm/core/error.hpp"
#include "cgemm/sharding/dims.hpp"
#include "cgemm/sharding/gemm_abstract.hpp"
#include "py_int.hpp"

namespace cgemm {

namespace {

std::string name(DType t) { return std::string(dtype_name(t)); }

// Python's a % m: the sign of the divisor, and ZeroDivisionError for m == 0.
int64_t py_mod(int64_t a, int64_t m, const std::string& what) {
  if (m == 0) throw PlanError(what + ": integer modulo by zero");
  const int64_t r = a % m;
  return (r != 0 && ((r < 0) != (m < 0))) ? r + m : r;
}

// The remap of a contracting dim i to (ndim - 1 - i) % divisor.
int64_t flip_dim(int64_t ndim, int64_t i, int64_t divisor, const std::string& what) {
  int64_t flipped = 0;
  if (__builtin_sub_overflow(ndim - 1, i, &flipped)) {
    throw PlanError(what + ": ndim - 1 - " + std::to_string(i) + " overflows 64 bits");
  }
  return py_mod(flipped, divisor, what);
}

// Where a Python slice bound b of a sequence of n items falls: negative counts from the end,
// and both ends clamp.
size_t slice_bound(int64_t b, size_t n) {
  const auto len = static_cast<int64_t>(n);
  if (b < 0) b += len;
  return static_cast<size_t>(std::clamp<int64_t>(b, 0, len));
}

// math.prod of dims: exactly 0 when a dim is 0 (whatever the others), else the checked
// product.
int64_t py_prod(const Shape& dims, const std::string& what) {
  if (std::find(dims.begin(), dims.end(), int64_t{0}) != dims.end()) return 0;
  int64_t p = 1;
  for (int64_t d : dims) p = checked_mul(p, d, what);
  return p;
}

Shape head(const Shape& s, int64_t b) {  // s[:b]
  return Shape(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(slice_bound(b, s.size())));
}
Shape tail(const Shape& s, int64_t b) {  // s[b:]
  return Shape(s.begin() + static_cast<std::ptrdiff_t>(slice_bound(b, s.size())), s.end());
}

}  // namespace

int64_t grouped_lhs_axis_boundary(const std::vector<int64_t>& cdims, bool is_transposed) {
  if (cdims.empty()) throw PlanError("get_lhs_axis_boundary: empty contracting dims");
  if (is_transposed) {
    return checked_add(*std::max_element(cdims.begin(), cdims.end()), 1, "lhs axis boundary");
  }
  return *std::min_element(cdims.begin(), cdims.end());
}

int64_t grouped_rhs_axis_boundary(const std::vector<int64_t>& cdims, bool is_transposed) {
  if (cdims.empty()) throw PlanError("get_rhs_axis_boundary: empty contracting dims");
  if (is_transposed) return *std::min_element(cdims.begin(), cdims.end());
  return checked_add(*std::max_element(cdims.begin(), cdims.end()), 1, "rhs axis boundary");
}

bool should_enforce_v2_grouped_gemm(const std::optional<std::string>& env) {
  const std::string value = env.value_or("0");  // os.getenv(..., "0")
  const auto nonzero = detail::py_int_is_nonzero(value);
  if (!nonzero) {
    throw PlanError("NVTE_JAX_ENFORCE_V2_GROUPED_GEMM must be an integer (0 or 1), got: '" + value +
                    "'");
  }
  return *nonzero;
}

bool can_use_v2_grouped_gemm(ScalingMode mode, DType lhs_dtype, bool has_bias, bool v2_available,
                             int compute_capability, bool enforce) {
  if (!v2_available) {
    if (enforce) {
      throw PlanError(
          "The TE V2 grouped GEMM is not available but NVTE_JAX_ENFORCE_V2_GROUPED_GEMM is "
          "enabled.");
    }
    return false;
  }
  // nvte_grouped_gemm (the v2 kernel) needs SM100+.
  if (compute_capability < 100) {
    if (enforce) {
      throw PlanError(
          "The TE V2 grouped GEMM requires SM100+ (Blackwell or newer) but current device "
          "compute capability of GPU 0 is " +
          std::to_string(compute_capability) + " and NVTE_JAX_ENFORCE_V2_GROUPED_GEMM is enabled.");
    }
    return false;
  }
  if (mode == ScalingMode::kNoScaling && lhs_dtype == DType::kBFloat16 && !has_bias) return true;
  if (enforce) {
    throw PlanError(
        "The TE V2 grouped GEMM currently only supports BF16 with no quantization recipe and "
        "without bias, but received scaling_mode=" +
        std::string(scaling_mode_name(mode)) + ", dtype=" + name(lhs_dtype) +
        ", has_bias=" + (has_bias ? "True" : "False"));
  }
  return false;
}

int64_t grouped_cublas_workspace_bytes(ScalingMode mode, int64_t lhs_scale_inv_size,
                                       int64_t rhs_scale_inv_size, bool use_v2_ffi,
                                       int compute_capability, int64_t num_compute_streams) {
  const std::string what = "grouped GEMM cuBLAS workspace";
  const int64_t streams = use_v2_ffi ? 1 : num_compute_streams;
  int64_t w = checked_mul(cublas_workspace_bytes(compute_capability), streams, what);
  // cuBLAS wants a 256-byte aligned pointer and JAX buffers need not be.
  w = checked_add(w, 256, what);
  if (is_tensor_scaling(mode)) {
    // One scale per matrix, each aligned to 16 bytes (CUDA 12.9.1 and later).
    w = checked_add(w, checked_mul(lhs_scale_inv_size, 16, what), what);
    w = checked_add(w, checked_mul(rhs_scale_inv_size, 16, what), what);
  } else if (is_mxfp8(mode)) {
    // The swizzled scale-inverse buffers, each padded for 256-byte alignment.
    w = checked_add(w, checked_add(lhs_scale_inv_size, 256, what), what);
    w = checked_add(w, checked_add(rhs_scale_inv_size, 256, what), what);
  }
  return w;
}

GroupedGemm grouped_gemm(const GroupedGemmInput& in) {
  const GroupedOperand& lhs = in.lhs;
  const GroupedOperand& rhs = in.rhs;
  GroupedGemm r;

  // The operands: the scaling mode and the output dtype come from lhs.
  r.scaling_mode = lhs.scaled ? lhs.scaling_mode : ScalingMode::kNoScaling;
  DType out_dtype = lhs.scaled ? lhs.dq_dtype : lhs.dtype;
  if (lhs.scaled && rhs.scaled && lhs.scaling_mode != rhs.scaling_mode) {
    throw PlanError("Mismatched scaling modes: lhs.scaling_mode=" +
                    std::string(scaling_mode_name(lhs.scaling_mode)) +
                    ", rhs.scaling_mode=" + std::string(scaling_mode_name(rhs.scaling_mode)));
  }

  // The output's ragged dim follows the operand with a ragged non-contracting dim; a ragged
  // rhs (wgrad: its contracting dim is ragged) gives a uniform output.
  const bool rhs_ragged = rhs.first_dims_size > 0 || rhs.last_dims_size > 0;
  const bool lhs_ragged = lhs.first_dims_size > 0 || lhs.last_dims_size > 0;
  if (!rhs_ragged) {
    if (lhs.first_dims_size > 0) {
      r.out_first_dims_size = lhs.first_dims_size;
    } else {
      r.out_last_dims_size = lhs.last_dims_size;
    }
  }
  r.out_dtype = in.preferred_element_type.value_or(out_dtype);

  // Layouts from the contracting dims as given (never sanitized).
  std::vector<int64_t> lhs_cd = in.lhs_contracting_dims;
  std::vector<int64_t> rhs_cd = in.rhs_contracting_dims;
  if (lhs_cd.empty() || rhs_cd.empty()) {
    throw PlanError("grouped_gemm: contracting dims " + dims_str(lhs_cd) + ", " + dims_str(rhs_cd) +
                    ": an empty list has no last dim (IndexError)");
  }
  const auto lhs_ndim = static_cast<int64_t>(lhs.original_shape.size());
  const auto rhs_ndim = static_cast<int64_t>(rhs.original_shape.size());
  r.lhs_is_trans = lhs_cd.back() != lhs_ndim - 1;
  r.lhs_flatten_axis = static_cast<int64_t>(lhs_cd.size()) * (r.lhs_is_trans ? 1 : -1);
  // rhs is transposed ("T" layout) when K is its last dim.
  r.rhs_is_trans = rhs_cd.back() == rhs_ndim - 1;
  r.rhs_flatten_axis = r.rhs_is_trans ? -static_cast<int64_t>(rhs_cd.size())
                                      : 1 + static_cast<int64_t>(rhs_cd.size());

  if (lhs.dtype == DType::kFloat8E5M2 && rhs.dtype == DType::kFloat8E5M2) {
    throw PlanError("FP8 GEMM does not support E5M2 * E5M2");
  }

  // Below SM100 tensor-scaled FP8 GEMMs take only the NT layout, and a grouped operand cannot
  // be re-laid out here: the data must already be lhs N, rhs T.
  if (is_tensor_scaling(r.scaling_mode) && !(in.compute_capability >= 100)) {
    if (!(lhs.scaled && rhs.scaled)) {
      // gemm.py then reads lhs_q, bound only on the quantize-inside path.
      throw PlanError(
          "grouped_gemm: tensor scaling below compute capability 100 needs both operands "
          "quantized (UnboundLocalError on lhs_q)");
    }
    if (r.lhs_is_trans != lhs.layout_is_t) {
      throw PlanError("lhs input must be transposed before calling grouped_gemm");
    }
    if ((!r.rhs_is_trans) != rhs.layout_is_t) {
      throw PlanError("rhs input must be transposed before calling grouped_gemm");
    }
    r.lhs_is_trans = false;
    r.rhs_is_trans = true;
    if (lhs.layout_is_t) {
      for (auto& d : lhs_cd) d = flip_dim(lhs_ndim, d, lhs_ndim, "lhs contracting dim remap");
    }
    if (rhs.layout_is_t) {
      // fwd/dgrad: rhs [G, K, N] has G first, which the remap excludes.
      const int64_t divisor = lhs_ragged ? rhs_ndim - 1 : rhs_ndim;
      for (auto& d : rhs_cd) {
        d = flip_dim(rhs_ndim, d, divisor, "rhs contracting dim remap") + (lhs_ragged ? 1 : 0);
      }
    }
  }
  r.lhs_contracting_dims = lhs_cd;
  r.rhs_contracting_dims = rhs_cd;
  r.lhs_axis_boundary = grouped_lhs_axis_boundary(lhs_cd, r.lhs_is_trans);
  r.rhs_axis_boundary = grouped_rhs_axis_boundary(rhs_cd, r.rhs_is_trans);

  // The first non-empty group-size array gives the number of GEMMs.
  const std::array<int64_t, 6> dims_sizes{lhs.first_dims_size,   lhs.last_dims_size,
                                          rhs.first_dims_size,   rhs.last_dims_size,
                                          r.out_first_dims_size, r.out_last_dims_size};
  for (int64_t n : dims_sizes) {
    if (n != 0) {
      r.num_gemms = n;
      break;
    }
  }
  if (r.num_gemms == 0) {
    throw PlanError(
        "grouped_gemm requires at least one non-empty dimension array. Ensure lhs or rhs tensor "
        "objects carry first_dims or last_dims.");
  }

  // Collapsed 2D sizes and the output shape from the N-D original shapes.
  const Shape& ls = lhs.original_shape;
  const Shape& rs = rhs.original_shape;
  r.lhs_left_size = py_prod(head(ls, r.lhs_axis_boundary), "lhs_left_size");
  r.lhs_right_size = py_prod(tail(ls, r.lhs_axis_boundary), "lhs_right_size");
  r.rhs_left_size = py_prod(head(rs, r.rhs_axis_boundary), "rhs_left_size");
  r.rhs_right_size = py_prod(tail(rs, r.rhs_axis_boundary), "rhs_right_size");
  const Shape lhs_nc =
      r.lhs_is_trans ? tail(ls, r.lhs_axis_boundary) : head(ls, r.lhs_axis_boundary);
  Shape rhs_nc;
  if (r.rhs_is_trans) {
    // range(boundary) indexes rhs: past its end is an IndexError. A rhs without ragged dims
    // (fwd/dgrad, e.g. kernel_T (G, N, K)) skips its G dim 0.
    for (int64_t d = rhs_ragged ? 0 : 1; d < r.rhs_axis_boundary; ++d) {
      if (d >= rhs_ndim) {
        throw PlanError("grouped_gemm: rhs non-contracting dim " + std::to_string(d) +
                        " is out of range for rhs shape " + shape_str(rs) + " (IndexError)");
      }
      rhs_nc.push_back(rs[static_cast<size_t>(d)]);
    }
  } else {
    rhs_nc = tail(rs, r.rhs_axis_boundary);
  }
  if (rhs_ragged) r.out_shape.push_back(r.num_gemms);
  r.out_shape.insert(r.out_shape.end(), lhs_nc.begin(), lhs_nc.end());
  r.out_shape.insert(r.out_shape.end(), rhs_nc.begin(), rhs_nc.end());

  r.has_bias = in.bias_shape.has_value();
  if (r.has_bias) {
    bool matches = in.bias_shape->size() == 2 && (*in.bias_shape)[0] == r.num_gemms;
    if (matches) {
      // N beyond 64 bits cannot equal a bias dim.
      try {
        matches = (*in.bias_shape)[1] == py_prod(rhs_nc, "bias N");
      } catch (const Error&) {
        matches = false;
      }
    }
    if (!matches) {
      throw PlanError("bias shape " + shape_str(*in.bias_shape) +
                      " does not match expected shape (" + std::to_string(r.num_gemms) + ", prod " +
                      shape_str(rhs_nc) + ")");
    }
  }
  if (in.group_offset_given) {
    throw PlanError(
        "group_offset is not supported yet and is instead computed internally assuming "
        "contiguous grouping.");
  }

  const bool enforce = should_enforce_v2_grouped_gemm(in.enforce_v2_env);
  r.use_v2_ffi = can_use_v2_grouped_gemm(r.scaling_mode, lhs.dtype, r.has_bias, in.v2_available,
                                         in.compute_capability, enforce);

  // GroupedGemmPrimitive.abstract: num_groups is num_gemms (the same six arrays, and the
  // alpha / group_offset fallback is never reached), and every non-empty array must have
  // that length (_assert_grouped_gemm_dims_shapes).
  const int64_t num_groups = r.num_gemms;
  static constexpr std::array<const char*, 6> kDimsNames{"lhs_first_dims", "lhs_last_dims",
                                                         "rhs_first_dims", "rhs_last_dims",
                                                         "out_first_dims", "out_last_dims"};
  int64_t ragged_buffers = 0;
  for (size_t i = 0; i < dims_sizes.size(); ++i) {
    if (dims_sizes[i] > 0) {
      ++ragged_buffers;
      if (dims_sizes[i] != num_groups) {
        throw PlanError("grouped GEMM " + std::string(kDimsNames[i]) + " has size " +
                        std::to_string(dims_sizes[i]) +
                        ", expected num_groups=" + std::to_string(num_groups));
      }
    }
  }
  r.cublas_workspace_bytes = grouped_cublas_workspace_bytes(
      r.scaling_mode, lhs.scaled ? lhs.scale_inv_size : 0, rhs.scaled ? rhs.scale_inv_size : 0,
      r.use_v2_ffi, in.compute_capability, in.num_compute_streams);
  if (r.use_v2_ffi) {
    r.setup_workspace_bytes = in.setup_workspace_size;
    // One slot of num_groups int64 per non-empty dims array, at least one.
    r.int64_workspace_bytes = checked_mul(
        checked_mul(std::max<int64_t>(ragged_buffers, 1), num_groups, "int64 workspace"), 8,
        "int64 workspace");
  }
  return r;
}

}  // namespace cgemm
