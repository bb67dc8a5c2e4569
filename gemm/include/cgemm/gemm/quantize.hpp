#pragma once
// The host quantizers of Transformer Engine's scaling modes on row-major float buffers (the
// caller converts bf16 to float): per-tensor FP8 (delayed and current scaling), MXFP8 (E8M0
// scales per 32-element block) and NVFP4 (E4M3 scales per 16-element block plus a per-tensor
// scale), their dequantizers, and the cuBLAS scale layout (padding and swizzle). The element
// casts are those of cgemm/core/float8.hpp, so the CPU emulation and the device kernels agree
// bit for bit. Every function throws cgemm::Error naming the argument that is wrong.

#include <cstdint>

#include "cgemm/core/dtype.hpp"

namespace cgemm::quant {

// ---- per-tensor scaling (DELAYED_TENSOR_SCALING, CURRENT_TENSOR_SCALING) ----

/// max |x[i]| over `n` values; NaN values are ignored (fmaxf, as TE's amax kernel), an infinite
/// value gives inf; 0 for n == 0.
float amax(const float* x, int64_t n);

/// The scale multiplying values before the cast, and its reciprocal (the GEMM's scale_inv).
struct TensorScale {
  float scale = 1.0f;
  float scale_inv = 1.0f;
};

/// TE's scale update: scale = fp8_max(fmt) / amax / 2^margin. An amax of 0, NaN or inf keeps
/// `previous_scale` (delayed scaling passes the last scale; current scaling passes 1, as TE's
/// compute_scale_from_amax); a scale that overflows to inf becomes FLT_MAX. scale_inv = 1 / scale.
/// `fmt` is kFloat8E4M3 or kFloat8E5M2.
TensorScale scale_from_amax(float amax, DType fmt, int margin = 0, float previous_scale = 1.0f);

/// out[i] = saturating cast of x[i] * scale to `fmt` (kFloat8E4M3 or kFloat8E5M2), i < n.
void quantize_tensor(const float* x, int64_t n, float scale, DType fmt, uint8_t* out);
/// The transposed copy (TE's colwise data for tensor scaling): x is [rows, cols], out is
/// [cols, rows] with out[c * rows + r] = cast(x[r * cols + c] * scale). Makes the [N, K] copy
/// of a [K, N] weight that a Hopper FP8 GEMM contracts on its last dim.
void quantize_transpose(const float* x, int64_t rows, int64_t cols, float scale, DType fmt,
                        uint8_t* out);
/// out[i] = decode(q[i]) * scale_inv.
void dequantize_tensor(const uint8_t* q, int64_t n, float scale_inv, DType fmt, float* out);

// ---- block scaling: shapes ----

/// A 2-D scale tensor's shape, row-major.
struct ScaleShape {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t size() const { return rows * cols; }
  bool operator==(const ScaleShape&) const = default;
};

/// Which dim a block runs along. kRowwise: along the last (contracting, row-major) dim of a
/// [rows, cols] matrix. kColwise: along the rows (TE's colwise form): the data keeps the
/// [rows, cols] layout, the scale is [rows / block, cols]; it equals the rowwise form of the
/// transposed matrix, transposed back.
enum class BlockDir { kRowwise, kColwise };

// ---- MXFP8 (MXFP8_1D_SCALING) ----

inline constexpr int64_t kMxfp8Block = 32;
/// The byte apply_padding_to_scale_inv pads with: E8M0 0x00 = 2^-127, TE's padding value
/// (jax/quantize: "pad the scales with the lowest representable value (2^-127)").
inline constexpr uint8_t kE8M0PadByte = 0x00;

/// [rows, cols / 32] (kRowwise, cols % 32 == 0) or [rows / 32, cols] (kColwise,
/// rows % 32 == 0); throws cgemm::Error naming the dim that is not a multiple of 32.
ScaleShape mxfp8_scale_shape(int64_t rows, int64_t cols, BlockDir dir);

/// Per 32-element block: scale_inv (E8M0) = 2^ceil(log2(block_amax / fp8_max)) as TE
/// (float_to_e8m0(block_amax * (1 / fp8_max)), the exponent rounded up); a block of zeros gets
/// 0x00 (2^-127, TE's smallest). data = saturating cast of x * e8m0_quantize_factor(scale_inv).
/// `data` is [rows, cols] bytes in `fmt` (kFloat8E4M3 or kFloat8E5M2), `scale_inv` is
/// mxfp8_scale_shape(rows, cols, dir) bytes. NaN values are ignored by the block amax.
void quantize_mxfp8(const float* x, int64_t rows, int64_t cols, DType fmt, BlockDir dir,
                    uint8_t* data, uint8_t* scale_inv);
/// out[r, c] = decode(data[r, c]) * e8m0_to_float(block scale of (r, c)).
void dequantize_mxfp8(const uint8_t* data, const uint8_t* scale_inv, int64_t rows, int64_t cols,
                      DType fmt, BlockDir dir, float* out);

/// The padded shape cuBLAS reads: kRowwise [roundup(rows, 128), roundup(cols, 4)], kColwise
/// [roundup(rows, 4), roundup(cols, 128)] (TE's block alignment (128, 4), swapped for colwise).
/// `unpadded` is the scale's shape.
ScaleShape padded_scale_shape(ScaleShape unpadded, BlockDir dir);
/// Copies `scale` [unpadded] into `out` [padded_scale_shape(unpadded, dir)], the new cells set
/// to kE8M0PadByte (as TE's apply_padding_to_scale_inv).
void apply_padding_to_scale_inv(const uint8_t* scale, ScaleShape unpadded, BlockDir dir,
                                uint8_t* out);
/// The seed's swizzled_scale on a 2-D scale [shape] (already padded): kColwise transposes it
/// first (to [cols, rows]); then, with R x C the (transposed) shape, R % 128 == 0 and
/// C % 4 == 0 (else cgemm::Error), reshape (R/128, 4, 32, C/4, 4), transpose (0, 3, 2, 1, 4),
/// flatten into `out` (shape.size() bytes). Element (r, c) of the (transposed) scale, with
/// r = 128a + 32b + i, c = 4d + e, lands at ((((a * C/4 + d) * 32 + i) * 4 + b) * 4 + e).
void swizzled_scale(const uint8_t* scale, ScaleShape shape, BlockDir dir, uint8_t* out);

// ---- NVFP4 (NVFP4_1D_SCALING, NVFP4_2D_SCALING) ----

inline constexpr int64_t kNvfp4Block = 16;

/// The per-tensor scale_inv the GEMM's alpha multiplies: amax / (6 * 448) (seed
/// _get_nvfp4_tensor_scale_inv).
float nvfp4_tensor_scale_inv(float amax);
/// TE's global encode scale (compute_global_encode_scaling_factor_FP4): 448 * 6 / amax, FLT_MAX
/// where that overflows, 1 where amax is 0 or inf.
float nvfp4_global_encode_scale(float amax);
/// [rows, cols / 16]; cols % 16 == 0 (and rows % 16 == 0 when two_d) else cgemm::Error.
ScaleShape nvfp4_scale_shape(int64_t rows, int64_t cols, bool two_d);
/// Bytes of the packed e2m1 data of a [rows, cols] matrix: rows * cols / 2.
int64_t nvfp4_data_bytes(int64_t rows, int64_t cols);

/// Blocks of 16 along the last dim (1-D), or 16 x 16 tiles (two_d, TE's nvfp4_2d for weights:
/// each of a tile's 16 rows stores the tile's scale). With S_enc = nvfp4_global_encode_scale(
/// tensor_amax): block scale (E4M3) = cast(min(block_amax * (S_enc * (1 / 6)), FLT_MAX)) (TE's
/// compute_decoding_scaling_factor); values are multiplied by
/// min(1 / (float(block scale) * (1 / S_enc)), FLT_MAX) and cast to e2m1 (RNE, saturating).
/// `tensor_amax` is the amax of the whole (global) tensor. `data` holds two values a byte, the
/// lower-index element in the low nibble; `scale` is nvfp4_scale_shape bytes (E4M3).
void quantize_nvfp4(const float* x, int64_t rows, int64_t cols, float tensor_amax, bool two_d,
                    uint8_t* data, uint8_t* scale);
/// out[r, c] = e2m1(data) * e4m3(block scale) * tensor_scale_inv (= nvfp4_tensor_scale_inv).
void dequantize_nvfp4(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t cols,
                      float tensor_scale_inv, float* out);

}  // namespace cgemm::quant
