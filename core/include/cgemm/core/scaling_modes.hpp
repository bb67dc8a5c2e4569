#pragma once
// The scaling recipes, one table: a row per Transformer Engine ScalingMode with its names (the
// planner's, as gemm.py writes them, and the runtime's option words), the element formats it
// quantizes to, its scale layout and how its scales follow the amax, the collectives and the
// backends that run it. Every reader takes what it needs from the row: the planner's names and
// predicates (sharding/scaling_mode.hpp), the option words and their error messages
// (runtime/quantization_names.hpp), plan_quantization (runtime/src/quantization/quantization.cpp),
// gemm.py's operand checks (sharding/src/gemm_abstract.cpp) and the backends' capability checks
// (gemm/src/cublaslt_gemm.cpp, runtime/src/cuda/compute.cpp). A new mode is a new enumerator and
// a new row here (plus, for a new scale layout, its kernels).
//
// It lives in core/ because its readers span sharding/ (the planner), gemm/ (the backends'
// tasks: BlockScaling and ScaleRule) and runtime/. Kept C++17 so CUDA sources can include it
// (through gemm/quantize_task.hpp).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cgemm/core/dtype.hpp"

namespace cgemm {

/// Transformer Engine's ScalingMode; predicates as in gemm.py's ScalingMode methods.
enum class ScalingMode {
  kNoScaling,
  kDelayedTensorScaling,
  kCurrentTensorScaling,
  kMxfp8_1d,
  kNvfp4_1d,
  kNvfp4_2d
};

/// How quantized data is scaled (TE's ScalingMode, as the runtime executes it).
enum class BlockScaling {
  kTensor,  // one fp32 scale_inv per tensor (delayed and current scaling)
  kMxfp8,   // E8M0 scale_inv per 32 contracting elements (MXFP8_1D_SCALING)
  kNvfp4,   // E4M3 scale per 16 contracting elements, times a per-tensor scale_inv (NVFP4)
};

/// How an operand's scale follows its amax.
enum class ScaleRule {
  kCurrent,  // from this call's amax (Float8CurrentScaling)
  kDelayed,  // from the history of earlier calls' amaxes (DelayedScaling)
  kNvfp4,    // NVFP4's per-tensor scale from this call's amax
};

/// The dtype of the scales a mode stores (E8M0 has no DType: it is a scale format only).
enum class ScaleDType { kNone, kFloat32, kE8M0, kE4M3 };

/// One scaling recipe.
struct ScalingModeRow {
  ScalingMode mode;
  std::string_view planner_name;  // gemm.py / TE's ScalingMode, lower case: "mxfp8_1d_scaling"
  std::string_view option;        // --scaling, cgemm_plan_options::scaling, Python: "mxfp8"
  // Element formats of the quantized lhs and rhs: chosen per operand among float8_e4m3fn and
  // float8_e5m2 (lhs_format, rhs_format), or fixed (`fixed_format`, the options' ignored).
  bool fp8_formats;
  DType fixed_format;  // when !fp8_formats and quantized: the one format
  // Scale layout: one scale per tensor, or one per `block` elements along the contracting dim
  // (1-D blocks; `two_d`: the rhs's blocks are 16 x 16 tiles, the tile's scale on its rows).
  BlockScaling layout;
  int block;  // elements per block scale; 0: per-tensor scales only
  bool two_d;
  ScaleDType block_scale_dtype;   // kNone without block scales
  ScaleDType tensor_scale_dtype;  // the per-tensor scale_inv the GEMM reads; kNone: none
  ScaleRule rule;                 // how the per-tensor scale follows the amax
  bool amax;                      // measures amaxes before quantizing (a per-tensor scale)
  // gemm.py's rules: the contracting size a multiple of this (assert_cublas_requirements);
  // the NT layout required below compute capability 10.0 (the Hopper layout check); runs
  // fused with a collective (_te_gemm refuses NVFP4 with one).
  int contracting_alignment;
  bool nt_layout_below_sm100;
  bool collective;
  // Backends: the CPU backend emulates every mode; the CUDA backend needs this compute
  // capability (0: any) and has kernels for it or not (quantization and GEMM).
  bool cpu;
  int cuda_min_compute_capability;
  bool cuda_kernels;
  std::string_view label;  // the backends' name for it in messages: "MXFP8"
};

inline constexpr std::array<ScalingModeRow, 6> kScalingModeTable{{
    // mode, planner_name, option,
    //   fp8_formats, fixed_format, layout, block, two_d, block_scale, tensor_scale, rule, amax,
    //   contracting_alignment, nt_layout_below_sm100, collective, cpu, cuda_min_cc, cuda_kernels,
    //   label
    {ScalingMode::kNoScaling, "no_scaling", "none",  //
     false, DType::kBFloat16, BlockScaling::kTensor, 0, false, ScaleDType::kNone, ScaleDType::kNone,
     ScaleRule::kCurrent, false,  //
     1, false, true, true, 0, true, "none"},
    {ScalingMode::kDelayedTensorScaling, "delayed_tensor_scaling", "delayed",  //
     true, DType::kFloat8E4M3, BlockScaling::kTensor, 0, false, ScaleDType::kNone,
     ScaleDType::kFloat32, ScaleRule::kDelayed, true,  //
     16, true, true, true, 0, true, "delayed"},
    {ScalingMode::kCurrentTensorScaling, "current_tensor_scaling", "current",  //
     true, DType::kFloat8E4M3, BlockScaling::kTensor, 0, false, ScaleDType::kNone,
     ScaleDType::kFloat32, ScaleRule::kCurrent, true,  //
     16, true, true, true, 0, true, "current"},
    {ScalingMode::kMxfp8_1d, "mxfp8_1d_scaling", "mxfp8",  //
     true, DType::kFloat8E4M3, BlockScaling::kMxfp8, 32, false, ScaleDType::kE8M0,
     ScaleDType::kNone, ScaleRule::kCurrent, false,  //
     16, false, true, true, 100, false, "MXFP8"},
    {ScalingMode::kNvfp4_1d, "nvfp4_1d_scaling", "nvfp4",  //
     false, DType::kFloat4E2M1, BlockScaling::kNvfp4, 16, false, ScaleDType::kE4M3,
     ScaleDType::kFloat32, ScaleRule::kNvfp4, true,  //
     32, true, false, true, 100, false, "NVFP4"},
    {ScalingMode::kNvfp4_2d, "nvfp4_2d_scaling", "nvfp4_2d",  //
     false, DType::kFloat4E2M1, BlockScaling::kNvfp4, 16, true, ScaleDType::kE4M3,
     ScaleDType::kFloat32, ScaleRule::kNvfp4, true,  //
     32, true, false, true, 100, false, "NVFP4"},
}};

/// The row of `m` (every ScalingMode has one; test_scaling_modes checks it).
constexpr const ScalingModeRow& scaling_mode_row(ScalingMode m) {
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (row.mode == m) return row;
  }
  return kScalingModeTable[0];
}

/// The first row scaling with `b` (the backends see the layout only, not the mode).
constexpr const ScalingModeRow& block_scaling_row(BlockScaling b) {
  for (const ScalingModeRow& row : kScalingModeTable) {
    if (row.layout == b && (b != BlockScaling::kTensor || row.amax)) return row;
  }
  return kScalingModeTable[0];
}

/// Elements per block along the contracting dim: 32 (MXFP8), 16 (NVFP4), 0 (tensor).
constexpr int block_size(BlockScaling b) { return block_scaling_row(b).block; }

/// Whether `m` quantizes at all (every mode but no_scaling).
constexpr bool is_quantized(ScalingMode m) { return m != ScalingMode::kNoScaling; }
constexpr bool is_tensor_scaling(ScalingMode m) {  // delayed or current
  return is_quantized(m) && scaling_mode_row(m).layout == BlockScaling::kTensor;
}
constexpr bool is_nvfp4(ScalingMode m) {  // nvfp4_1d or nvfp4_2d
  return scaling_mode_row(m).layout == BlockScaling::kNvfp4;
}
/// mxfp8_1d, nvfp4_1d, nvfp4_2d: Transformer Engine counts NVFP4 2D as 1D block scaling too (its
/// scale-inverse layout is per-row blocks), so the 2D mode shards its scales like the operand.
constexpr bool is_1d_block_scaling(ScalingMode m) {
  return scaling_mode_row(m).layout != BlockScaling::kTensor;
}
constexpr bool is_mxfp8(ScalingMode m) {  // mxfp8_1d
  return scaling_mode_row(m).layout == BlockScaling::kMxfp8;
}

}  // namespace cgemm
