#pragma once
// The 8- and 4-bit float formats of Transformer Engine's quantized GEMMs, per element, usable on
// host and device (CGEMM_HD, as convert.hpp), so the CPU emulation and the CUDA kernels round
// alike bit for bit. Kept C++17 so CUDA sources can include it.
//
// Every cast to a narrow format rounds to nearest even and SATURATES (as TE's casts and CUDA's
// __NV_SATFINITE): a finite value beyond the format's largest, and +-inf, become +-max.
// NaN choices (written once here, tested in test_float8):
//   e4m3 and e5m2: any NaN -> the canonical NaN 0x7f (sign dropped), as the hardware's
//   cvt.rn.satfinite does; e2m1 has no NaN: NaN -> +6 (0x7), the largest finite value.
// Subnormals of each format are produced and decoded (e4m3's smallest is 2^-9, e5m2's 2^-16,
// e2m1's 0.5); -0 keeps its sign in e4m3/e5m2/e2m1.

#include <cstdint>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/dtype.hpp"

namespace cgemm::numeric {

/// The largest finite value of a narrow format: 448 (kFloat8E4M3), 57344 (kFloat8E5M2),
/// 6 (kFloat4E2M1); 0 for the other dtypes (no exceptions here: device code calls it).
CGEMM_HD float fp8_max(DType t) {
  switch (t) {
    case DType::kFloat8E4M3:
      return 448.0f;
    case DType::kFloat8E5M2:
      return 57344.0f;
    case DType::kFloat4E2M1:
      return 6.0f;
    default:
      return 0.0f;
  }
}

namespace detail {

/// Magnitude code (sign excluded) of a finite, non-NaN |f| in a format with `mbits` mantissa
/// bits and exponent bias `bias`, rounded to nearest even and clamped to `max_code`.
/// Subnormals: below 2^(1 - bias) the value is a multiple of 2^(1 - bias - mbits).
CGEMM_HD uint32_t minifloat_code(uint32_t absu, int mbits, int bias, uint32_t max_code) {
  const uint32_t min_normal_bits = static_cast<uint32_t>(127 + 1 - bias) << 23;
  if (absu < min_normal_bits) {
    // Scaling by a power of two is exact, so `a` is the value in units of the format's
    // subnormal step; the integer part and the remainder are exact too.
    const uint32_t step_exp = static_cast<uint32_t>(127 + mbits - (1 - bias)) << 23;
    const float a = bits_float(absu) * bits_float(step_exp);
    uint32_t m = static_cast<uint32_t>(a);
    const float rem = a - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return m;  // m == 2^mbits is the smallest normal's code: the encoding carries over
  }
  const int shift = 23 - mbits;
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rounded = absu + (half - 1u) + ((absu >> shift) & 1u);
  uint32_t code = (rounded >> shift) - (static_cast<uint32_t>(127 - bias) << mbits);
  if (code > max_code) code = max_code;
  return code;
}

/// Value of a magnitude code (sign excluded) that is neither inf nor NaN.
CGEMM_HD float minifloat_value(uint32_t code, int mbits, int bias) {
  const uint32_t e = code >> mbits;
  const uint32_t m = code & ((1u << mbits) - 1u);
  if (e == 0) {
    // m * 2^(1 - bias - mbits), exact in float
    const uint32_t step_bits = static_cast<uint32_t>(127 + 1 - bias - mbits) << 23;
    return static_cast<float>(m) * bits_float(step_bits);
  }
  return bits_float(((e + 127u - static_cast<uint32_t>(bias)) << 23) | (m << (23 - mbits)));
}

}  // namespace detail

/// float -> float8_e4m3fn (bias 7, no inf, 0x7f/0xff NaN, max 448): RNE, saturating;
/// NaN -> 0x7f.
CGEMM_HD uint8_t float_to_e4m3(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return 0x7f;
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t code = absu == 0x7f800000u ? 0x7eu : detail::minifloat_code(absu, 3, 7, 0x7eu);
  return static_cast<uint8_t>(sign | code);
}
CGEMM_HD float e4m3_to_float(uint8_t b) {
  const uint32_t code = b & 0x7fu;
  if (code == 0x7fu) return bits_float(0x7fc00000u);
  const float v = detail::minifloat_value(code, 3, 7);
  return (b & 0x80u) ? -v : v;
}

/// float -> float8_e5m2 (bias 15, max 57344, inf 0x7c): RNE, saturating finite (inf -> +-57344,
/// as __NV_SATFINITE); NaN -> 0x7f.
CGEMM_HD uint8_t float_to_e5m2(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return 0x7f;
  const uint32_t sign = (u >> 24) & 0x80u;
  const uint32_t code = absu == 0x7f800000u ? 0x7bu : detail::minifloat_code(absu, 2, 15, 0x7bu);
  return static_cast<uint8_t>(sign | code);
}
CGEMM_HD float e5m2_to_float(uint8_t b) {
  const uint32_t code = b & 0x7fu;
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  if (code == 0x7cu) return bits_float(sign | 0x7f800000u);
  if (code > 0x7cu) return bits_float(0x7fc00000u);
  const float v = detail::minifloat_value(code, 2, 15);
  return sign ? -v : v;
}

/// float -> float4_e2m1fn in the low nibble (bit 3 the sign; values 0, 0.5, 1, 1.5, 2, 3, 4, 6):
/// RNE, saturating to +-6; NaN -> 0x7 (+6: the format has no NaN).
CGEMM_HD uint8_t float_to_e2m1(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return 0x7;
  const uint32_t sign = (u >> 28) & 0x8u;
  const uint32_t code = absu == 0x7f800000u ? 0x7u : detail::minifloat_code(absu, 1, 1, 0x7u);
  return static_cast<uint8_t>(sign | code);
}
/// Decodes the low nibble of `nibble` (the high nibble is ignored).
CGEMM_HD float e2m1_to_float(uint8_t nibble) {
  const float v = detail::minifloat_value(nibble & 0x7u, 1, 1);
  return (nibble & 0x8u) ? -v : v;
}

/// E8M0 (exponent only, bias 127, 0xff NaN): 2^(b - 127); b == 0 is 2^-127 (a float subnormal).
CGEMM_HD float e8m0_to_float(uint8_t b) {
  if (b == 0xffu) return bits_float(0x7fc00000u);
  if (b == 0) return bits_float(0x00400000u);
  return bits_float(static_cast<uint32_t>(b) << 23);
}

/// The E8M0 block scale of MXFP8 for `v` = block_amax * (1 / fp8_max) (v >= 0): the power of
/// two at or above v (the exponent rounded UP, as TE's float_to_e8m0, so the block never
/// overflows). NaN -> 0xff; inf -> 0xfe; 0 (and v <= 2^-127) -> 0x00 (2^-127, the smallest);
/// saturates at 0xfe (2^127).
CGEMM_HD uint8_t float_to_e8m0(float v) {
  const uint32_t u = float_bits(v) & 0x7fffffffu;
  if (u > 0x7f800000u) return 0xff;
  if (u == 0x7f800000u) return 0xfe;
  uint32_t exponent = u >> 23;
  const uint32_t mantissa = u & 0x7fffffu;
  const bool at_most_min = exponent == 0 && mantissa <= 0x400000u;  // v <= 2^-127
  if (mantissa != 0 && exponent != 0xfeu && !at_most_min) ++exponent;
  return static_cast<uint8_t>(exponent);
}

/// The factor MXFP8 multiplies a block's values by before the cast: 1 / e8m0_to_float(b), except
/// b == 0 gives 1 (as TE's exp2f_rcp; such a block holds values <= 2^-127 * fp8_max) and
/// b == 0xfe gives 0 as in TE (the bits 2^(127 - b) would need, 2^-127, are not a normal float);
/// NaN for 0xff.
CGEMM_HD float e8m0_quantize_factor(uint8_t b) {
  if (b == 0xffu) return bits_float(0x7fc00000u);
  if (b == 0) return 1.0f;
  return bits_float(static_cast<uint32_t>(254u - b) << 23);
}

/// float -> `t` (kFloat8E4M3, kFloat8E5M2 or kFloat4E2M1, the latter in the low nibble);
/// 0 for other dtypes.
CGEMM_HD uint8_t float_to_narrow(float f, DType t) {
  switch (t) {
    case DType::kFloat8E4M3:
      return float_to_e4m3(f);
    case DType::kFloat8E5M2:
      return float_to_e5m2(f);
    case DType::kFloat4E2M1:
      return float_to_e2m1(f);
    default:
      return 0;
  }
}
/// `t`'s code -> float (see float_to_narrow); NaN for other dtypes.
CGEMM_HD float narrow_to_float(uint8_t b, DType t) {
  switch (t) {
    case DType::kFloat8E4M3:
      return e4m3_to_float(b);
    case DType::kFloat8E5M2:
      return e5m2_to_float(b);
    case DType::kFloat4E2M1:
      return e2m1_to_float(b);
    default:
      return bits_float(0x7fc00000u);
  }
}

}  // namespace cgemm::numeric
