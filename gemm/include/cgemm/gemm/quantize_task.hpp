#pragma once
// Quantization as the runtime hands it to a backend: the scaling modes of Transformer
// Engine's quantizers (DelayedScaling, Float8CurrentScaling, MXFP8BlockScaling, NVFP4
// BlockScaling), reduced to the three calls a backend implements (Backend::amax,
// Backend::update_scale, Backend::quantize) and the layout of a plan's scale state.
//
// Units: counts and sizes in elements unless named bytes; scales are fp32. "scale" multiplies
// a high-precision value into the FP8 range, "scale_inv" = 1 / scale multiplies it back (TE's
// names). Kept C++17 so CUDA sources can include it: the state update below is the one
// implementation both backends run, so the CPU and the GPU compute the same scales bit for bit.

#include <cstdint>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/scaling_modes.hpp"  // BlockScaling, ScaleRule, block_size

namespace cgemm {

/// TE's DelayedScaling recipe knobs (transformer_engine/common/recipe): the scale of step t
/// comes from the amaxes of the previous amax_history_len steps, reduced by `algo`.
enum class AmaxAlgo { kMax, kMostRecent };

/// The longest amax history: the state counts its steps in a float, exact below 2^24, and
/// keeps that count below 2 x amax_history_len. Every front end (cgemm-run, cgemm-bench, the C
/// API, Python) and the planner refuse longer ones.
inline constexpr int kMaxAmaxHistoryLen = 1 << 23;

struct ScalingRecipe {
  int amax_history_len = 1024;  // TE's default; 1..kMaxAmaxHistoryLen
  AmaxAlgo algo = AmaxAlgo::kMax;
  int margin = 0;  // scale = fp8_max / amax / 2^margin; 0 to 127
};

/// A plan's scale state of one operand, in backend memory (floats; `steps` is stored as a
/// float value, kept below 2 x amax_history_len so it stays exact):
///   [0] scale_inv  1 / scale, read by the GEMM (TE's scale_inv); NVFP4: amax / (6 x 448). First,
///                  so a 16-byte aligned state gives the aligned pointer cuBLASLt needs
///   [1] scale      the scale the next quantization uses
///   [2] amax       the amax of the last update (over the ranks holding pieces)
///   [3] steps      delayed scaling: amaxes recorded so far
///   [4 ...]        delayed scaling: the amax history, a ring of amax_history_len floats
/// A fresh state holds scale 1 (TE: the first step uses scale 1) and an empty history. The
/// amax of a call lives apart (Backend::amax), so the amaxes of both operands reduce together.
struct ScaleStateLayout {
  static constexpr int kScaleInv = 0, kScale = 1, kAmax = 2, kSteps = 3, kHistory = 4;
  /// Floats of one state, rounded up to 16 bytes so states placed back to back stay aligned.
  static int64_t floats(int history_len) { return (kHistory + history_len + 3) / 4 * 4; }
};

namespace numeric {

CGEMM_HD bool finite(float x) { return (float_bits(x) & 0x7f800000u) != 0x7f800000u; }

/// TE's scale from an amax: fp8_max / amax / 2^margin; an amax that is 0 or not finite keeps
/// `previous` (nothing to scale by); a scale that overflows fp32 is clamped to FLT_MAX.
CGEMM_HD float scale_from_amax(float amax, float fp8_max, int margin, float previous) {
  if (!(amax > 0.0f) || !finite(amax)) return previous;
  // 2^margin exactly (ScalingRecipe keeps margin in [0, 127]).
  float s = (fp8_max / amax) / bits_float(static_cast<uint32_t>(127 + margin) << 23);
  if (!finite(s)) s = 3.402823466e+38f;
  return s;
}

/// Current scaling: the scale of this call from this call's amax; an amax of 0 gives scale 1.
CGEMM_HD void update_current_scale(float* state, float amax, float fp8_max, int margin) {
  state[ScaleStateLayout::kAmax] = amax;
  const float s = scale_from_amax(amax, fp8_max, margin, 1.0f);
  state[ScaleStateLayout::kScale] = s;
  state[ScaleStateLayout::kScaleInv] = 1.0f / s;
}

/// Delayed scaling, after a step: records this step's amax in the history and sets the scale
/// the next step uses, from the max (or the most recent) of the last history_len amaxes.
CGEMM_HD void update_delayed_scale(float* state, float amax, int history_len, AmaxAlgo algo,
                                   float fp8_max, int margin) {
  state[ScaleStateLayout::kAmax] = amax;
  float* history = state + ScaleStateLayout::kHistory;
  const auto steps = static_cast<int64_t>(state[ScaleStateLayout::kSteps]);
  history[steps % history_len] = amax;
  const int64_t recorded = steps + 1 < history_len ? steps + 1 : history_len;
  // The window's max, or its latest entry. A NaN in the window makes the max NaN (as jnp.max
  // in TE), which keeps the scale until it leaves the window.
  float pick = amax;
  if (algo == AmaxAlgo::kMax) {
    for (int64_t i = 0; i < recorded && pick == pick; ++i) {
      const float h = history[i];
      pick = h != h || h > pick ? h : pick;
    }
  }
  const float s = scale_from_amax(pick, fp8_max, margin, state[ScaleStateLayout::kScale]);
  state[ScaleStateLayout::kScale] = s;
  state[ScaleStateLayout::kScaleInv] = 1.0f / s;
  // The count wraps by whole periods of the ring, so the index stays continuous.
  const int64_t next =
      steps + 1 >= 2 * static_cast<int64_t>(history_len) ? steps + 1 - history_len : steps + 1;
  state[ScaleStateLayout::kSteps] = static_cast<float>(next);
}

/// NVFP4's per-tensor scales (seed: _get_nvfp4_tensor_scale_inv; TE's global encode scale):
/// scale_inv = amax / (6 x 448), scale = 6 x 448 / amax (FLT_MAX where that overflows, 1 where
/// amax is 0 or not finite).
CGEMM_HD void update_nvfp4_scale(float* state, float amax) {
  constexpr float kRange = 6.0f * 448.0f;
  state[ScaleStateLayout::kAmax] = amax;
  state[ScaleStateLayout::kScaleInv] = amax / kRange;
  float s = 1.0f;
  if (amax > 0.0f && finite(amax)) {
    s = kRange / amax;
    if (!finite(s)) s = 3.402823466e+38f;
  }
  state[ScaleStateLayout::kScale] = s;
}

}  // namespace numeric

/// One scale update (Backend::update_scale): `state` is one operand's ScaleStateLayout,
/// `amax` this call's amax of it (already reduced over the ranks).
struct ScaleUpdate {
  float* state = nullptr;
  const float* amax = nullptr;
  ScaleRule rule = ScaleRule::kCurrent;
  ScalingRecipe recipe;
  float fp8_max = 448.0f;
};

namespace numeric {

/// The one implementation of Backend::update_scale, on host and device.
CGEMM_HD void apply_scale_update(float* state, float amax, ScaleRule rule,
                                 const ScalingRecipe& recipe, float fp8_max) {
  if (rule == ScaleRule::kDelayed) {
    update_delayed_scale(state, amax, recipe.amax_history_len, recipe.algo, fp8_max, recipe.margin);
  } else if (rule == ScaleRule::kNvfp4) {
    update_nvfp4_scale(state, amax);
  } else {
    update_current_scale(state, amax, fp8_max, recipe.margin);
  }
}

}  // namespace numeric

/// One quantization (Backend::quantize): `src` [rows, cols] row-major of src_dtype (float32,
/// bfloat16, float16) to `dst` in `format` (float8_e4m3fn, float8_e5m2, float4_e2m1fn: one
/// element per byte), [rows, cols], or [cols, rows] when `transpose` (TE's colwise copy: the
/// [N, K] operand a Hopper FP8 GEMM needs from a [K, N] weight). Blocks run along the last dim
/// of dst (the GEMM's contracting dim).
///   kTensor: dst = saturate(src * state[kScale]) (state: ScaleStateLayout). An FP8 src_dtype
///            equal to `format`, with `transpose`: the codes transposed as they are (TE's
///            fp8_transpose: the colwise copy of an FP8 tensor a collective gathered rowwise);
///            `state` is not read.
///   kMxfp8:  per block of 32: scale_inv = 2^e (E8M0, written to block_scale [rows of dst,
///            cols of dst / 32]) with the exponent rounded up so the block's amax fits;
///            dst = saturate(src / scale_inv).
///   kNvfp4:  per block of 16 (or 16 x 16 tiles when `two_d`, the tile's scale repeated on its
///            16 rows): the E4M3 block scale of (block amax / 6) / state[kScaleInv] with the
///            per-tensor scale_inv = amax / (6 * 448) in state[kScaleInv] (seed:
///            _get_nvfp4_tensor_scale_inv).
struct QuantizeTask {
  int64_t rows = 0, cols = 0;
  DType src_dtype = DType::kBFloat16;
  const void* src = nullptr;
  DType format = DType::kFloat8E4M3;
  void* dst = nullptr;
  bool transpose = false;
  BlockScaling scaling = BlockScaling::kTensor;
  bool two_d = false;
  const float* state = nullptr;  // the operand's ScaleStateLayout (read)
  uint8_t* block_scale = nullptr;
  // kTensor with a float32, bfloat16 or float16 source only: when set, the cast also writes
  // max |src| over the whole source to *amax (NaNs skipped, the value Backend::amax gives), so
  // delayed scaling records this call's amax without a second read of the source (TE's
  // cast-transpose computes the amax as it casts).
  float* amax = nullptr;
  const char* label = nullptr;  // for traces; may be null
};

}  // namespace cgemm
