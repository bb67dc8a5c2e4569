#include "cgemm/gemm/quantize.hpp"

#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "cgemm/core/error.hpp"
#include "cgemm/core/float8.hpp"

namespace cgemm::quant {

namespace {

using numeric::float_to_narrow;
using numeric::fp8_max;
using numeric::narrow_to_float;

void require_fp8(DType fmt, const char* what) {
  if (fmt != DType::kFloat8E4M3 && fmt != DType::kFloat8E5M2) {
    throw Error(std::string(what) + ": format must be float8_e4m3fn or float8_e5m2, got " +
                std::string(dtype_name(fmt)));
  }
}

void require_non_negative(int64_t v, const char* name, const char* what) {
  if (v < 0) {
    throw Error(std::string(what) + ": " + name + " must be >= 0, got " + std::to_string(v));
  }
}

void require_multiple(int64_t v, int64_t of, const char* name, const char* what) {
  if (v % of != 0) {
    throw Error(std::string(what) + ": " + name + " (" + std::to_string(v) +
                ") must be a multiple of " + std::to_string(of));
  }
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// fmaxf ignores a NaN operand, so NaN values do not enter a block's or a tensor's amax.
float abs_max(float acc, float v) { return fmaxf(acc, fabsf(v)); }

// TE multiplies by the reciprocal of fp8_max, computed in double and rounded to float once.
float fp8_max_rcp(DType fmt) { return static_cast<float>(1.0 / static_cast<double>(fp8_max(fmt))); }

}  // namespace

float amax(const float* x, int64_t n) {
  require_non_negative(n, "n", "amax");
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = abs_max(m, x[i]);
  return m;
}

TensorScale scale_from_amax(float amax_value, DType fmt, int margin, float previous_scale) {
  require_fp8(fmt, "scale_from_amax");
  float scale = previous_scale;
  if (std::isfinite(amax_value) && amax_value > 0.0f) {
    scale = fp8_max(fmt) / amax_value / std::ldexp(1.0f, margin);
  }
  if (std::isinf(scale)) scale = FLT_MAX;
  return TensorScale{scale, 1.0f / scale};
}

void quantize_tensor(const float* x, int64_t n, float scale, DType fmt, uint8_t* out) {
  require_fp8(fmt, "quantize_tensor");
  require_non_negative(n, "n", "quantize_tensor");
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_narrow(x[i] * scale, fmt);
}

void quantize_transpose(const float* x, int64_t rows, int64_t cols, float scale, DType fmt,
                        uint8_t* out) {
  require_fp8(fmt, "quantize_transpose");
  require_non_negative(rows, "rows", "quantize_transpose");
  require_non_negative(cols, "cols", "quantize_transpose");
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[c * rows + r] = float_to_narrow(x[r * cols + c] * scale, fmt);
    }
  }
}

void dequantize_tensor(const uint8_t* q, int64_t n, float scale_inv, DType fmt, float* out) {
  require_fp8(fmt, "dequantize_tensor");
  require_non_negative(n, "n", "dequantize_tensor");
  for (int64_t i = 0; i < n; ++i) out[i] = narrow_to_float(q[i], fmt) * scale_inv;
}

// ---- MXFP8 ----

ScaleShape mxfp8_scale_shape(int64_t rows, int64_t cols, BlockDir dir) {
  require_non_negative(rows, "rows", "MXFP8");
  require_non_negative(cols, "cols", "MXFP8");
  if (dir == BlockDir::kRowwise) {
    require_multiple(cols, kMxfp8Block, "cols (the contracting dim of rowwise blocks)", "MXFP8");
    return {rows, cols / kMxfp8Block};
  }
  require_multiple(rows, kMxfp8Block, "rows (the dim of colwise blocks)", "MXFP8");
  return {rows / kMxfp8Block, cols};
}

void quantize_mxfp8(const float* x, int64_t rows, int64_t cols, DType fmt, BlockDir dir,
                    uint8_t* data, uint8_t* scale_inv) {
  require_fp8(fmt, "quantize_mxfp8");
  const ScaleShape s = mxfp8_scale_shape(rows, cols, dir);
  // A block is kMxfp8Block elements `stride` apart starting at `first`.
  const int64_t stride = dir == BlockDir::kRowwise ? 1 : cols;
  const float rcp = fp8_max_rcp(fmt);
  for (int64_t sr = 0; sr < s.rows; ++sr) {
    for (int64_t sc = 0; sc < s.cols; ++sc) {
      const int64_t first =
          dir == BlockDir::kRowwise ? sr * cols + sc * kMxfp8Block : sr * kMxfp8Block * cols + sc;
      float block_amax = 0.0f;
      for (int64_t k = 0; k < kMxfp8Block; ++k)
        block_amax = abs_max(block_amax, x[first + k * stride]);
      const uint8_t e = numeric::float_to_e8m0(block_amax * rcp);
      scale_inv[sr * s.cols + sc] = e;
      const float factor = numeric::e8m0_quantize_factor(e);
      for (int64_t k = 0; k < kMxfp8Block; ++k) {
        const int64_t i = first + k * stride;
        data[i] = float_to_narrow(x[i] * factor, fmt);
      }
    }
  }
}

void dequantize_mxfp8(const uint8_t* data, const uint8_t* scale_inv, int64_t rows, int64_t cols,
                      DType fmt, BlockDir dir, float* out) {
  require_fp8(fmt, "dequantize_mxfp8");
  const ScaleShape s = mxfp8_scale_shape(rows, cols, dir);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t si =
          dir == BlockDir::kRowwise ? r * s.cols + c / kMxfp8Block : (r / kMxfp8Block) * s.cols + c;
      const int64_t i = r * cols + c;
      out[i] = narrow_to_float(data[i], fmt) * numeric::e8m0_to_float(scale_inv[si]);
    }
  }
}

ScaleShape padded_scale_shape(ScaleShape unpadded, BlockDir dir) {
  require_non_negative(unpadded.rows, "scale rows", "padded_scale_shape");
  require_non_negative(unpadded.cols, "scale cols", "padded_scale_shape");
  if (dir == BlockDir::kRowwise) return {round_up(unpadded.rows, 128), round_up(unpadded.cols, 4)};
  return {round_up(unpadded.rows, 4), round_up(unpadded.cols, 128)};
}

void apply_padding_to_scale_inv(const uint8_t* scale, ScaleShape unpadded, BlockDir dir,
                                uint8_t* out) {
  const ScaleShape p = padded_scale_shape(unpadded, dir);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t c = 0; c < p.cols; ++c) {
      const bool inside = r < unpadded.rows && c < unpadded.cols;
      out[r * p.cols + c] = inside ? scale[r * unpadded.cols + c] : kE8M0PadByte;
    }
  }
}

void swizzled_scale(const uint8_t* scale, ScaleShape shape, BlockDir dir, uint8_t* out) {
  require_non_negative(shape.rows, "scale rows", "swizzled_scale");
  require_non_negative(shape.cols, "scale cols", "swizzled_scale");
  const bool colwise = dir == BlockDir::kColwise;
  // (R, C): the shape after the colwise transpose; at(r, c) reads the transposed element.
  const int64_t rows = colwise ? shape.cols : shape.rows;
  const int64_t cols = colwise ? shape.rows : shape.cols;
  require_multiple(rows, 128, colwise ? "scale cols (rows once transposed)" : "scale rows",
                   "swizzled_scale");
  require_multiple(cols, 4, colwise ? "scale rows (cols once transposed)" : "scale cols",
                   "swizzled_scale");
  auto at = [&](int64_t r, int64_t c) {
    return colwise ? scale[c * shape.cols + r] : scale[r * shape.cols + c];
  };
  const int64_t col_groups = cols / 4;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t a = r / 128, b = (r / 32) % 4, i = r % 32;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t d = c / 4, e = c % 4;
      out[(((a * col_groups + d) * 32 + i) * 4 + b) * 4 + e] = at(r, c);
    }
  }
}

// ---- NVFP4 ----

float nvfp4_tensor_scale_inv(float amax_value) {
  return amax_value / (fp8_max(DType::kFloat4E2M1) * fp8_max(DType::kFloat8E4M3));
}

float nvfp4_global_encode_scale(float amax_value) {
  float s = fp8_max(DType::kFloat8E4M3) * fp8_max(DType::kFloat4E2M1) / amax_value;
  s = fminf(s, FLT_MAX);
  if (amax_value == 0.0f || s == 0.0f) return 1.0f;
  return s;
}

ScaleShape nvfp4_scale_shape(int64_t rows, int64_t cols, bool two_d) {
  require_non_negative(rows, "rows", "NVFP4");
  require_non_negative(cols, "cols", "NVFP4");
  require_multiple(cols, kNvfp4Block, "cols (the contracting dim)", "NVFP4");
  if (two_d) require_multiple(rows, kNvfp4Block, "rows (16 x 16 blocks of nvfp4_2d)", "NVFP4");
  return {rows, cols / kNvfp4Block};
}

int64_t nvfp4_data_bytes(int64_t rows, int64_t cols) { return rows * cols / 2; }

void quantize_nvfp4(const float* x, int64_t rows, int64_t cols, float tensor_amax, bool two_d,
                    uint8_t* data, uint8_t* scale) {
  const ScaleShape s = nvfp4_scale_shape(rows, cols, two_d);
  const float s_enc = nvfp4_global_encode_scale(tensor_amax);
  const float s_dec = 1.0f / s_enc;
  const float fp4_max_inv = 1.0f / fp8_max(DType::kFloat4E2M1);
  const int64_t tile_rows = two_d ? kNvfp4Block : 1;
  std::vector<float> tile_amax(static_cast<size_t>(s.cols));
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    for (int64_t sc = 0; sc < s.cols; ++sc) {
      float m = 0.0f;
      for (int64_t r = r0; r < r0 + tile_rows; ++r) {
        for (int64_t k = 0; k < kNvfp4Block; ++k)
          m = abs_max(m, x[r * cols + sc * kNvfp4Block + k]);
      }
      tile_amax[static_cast<size_t>(sc)] = m;
    }
    for (int64_t r = r0; r < r0 + tile_rows; ++r) {
      for (int64_t sc = 0; sc < s.cols; ++sc) {
        const float decode =
            fminf(tile_amax[static_cast<size_t>(sc)] * (s_enc * fp4_max_inv), FLT_MAX);
        const uint8_t block_scale = numeric::float_to_e4m3(decode);
        scale[r * s.cols + sc] = block_scale;
        const float factor = fminf(1.0f / (numeric::e4m3_to_float(block_scale) * s_dec), FLT_MAX);
        for (int64_t k = 0; k < kNvfp4Block; ++k) {
          const int64_t i = r * cols + sc * kNvfp4Block + k;
          const uint8_t q = numeric::float_to_e2m1(x[i] * factor);
          uint8_t& byte = data[i / 2];
          byte = (i % 2 == 0) ? static_cast<uint8_t>((byte & 0xf0u) | q)
                              : static_cast<uint8_t>((byte & 0x0fu) | (q << 4));
        }
      }
    }
  }
}

void dequantize_nvfp4(const uint8_t* data, const uint8_t* scale, int64_t rows, int64_t cols,
                      float tensor_scale_inv, float* out) {
  const ScaleShape s = nvfp4_scale_shape(rows, cols, false);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const uint8_t nibble = static_cast<uint8_t>(i % 2 == 0 ? data[i / 2] : data[i / 2] >> 4);
      const float block = numeric::e4m3_to_float(scale[r * s.cols + c / kNvfp4Block]);
      out[i] = numeric::e2m1_to_float(nibble) * block * tensor_scale_inv;
    }
  }
}

}  // namespace cgemm::quant
