#pragma once
// The dtype conversions: per-element conversions and the counter-based normal generator,
// usable on host and device (compiled by nvcc as __host__ __device__), so every backend makes
// the same inputs and rounds alike; and the host conversions of whole buffers. Kept C++17 so
// CUDA sources can include it.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cgemm/core/dtype.hpp"

#if defined(__CUDACC__)
#define CGEMM_HD __host__ __device__ __forceinline__
#else
#define CGEMM_HD inline
#endif

namespace cgemm {

/// Converts `count` elements of `dtype` (float32/bfloat16/float16) at `src` to float on the
/// host. Throws cgemm::Error for other dtypes.
void convert_to_float(const void* src, DType dtype, float* dst, int64_t count);
/// Converts `count` floats to `dtype` (float32/bfloat16/float16, round to nearest even) on the
/// host. Throws cgemm::Error for other dtypes.
void convert_from_float(const float* src, void* dst, DType dtype, int64_t count);

}  // namespace cgemm

namespace cgemm::numeric {

CGEMM_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}
CGEMM_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

/// float -> bfloat16 bits, round to nearest even; NaN stays NaN.
CGEMM_HD uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
CGEMM_HD float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

/// float -> IEEE half bits, round to nearest even, with subnormals, inf and NaN.
CGEMM_HD uint16_t float_to_fp16(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absu < 0x38800000u) {                    // subnormal half (or zero): scale into integer range
    float a = bits_float(absu) * 16777216.0f;  // 2^24: half subnormal unit is 2^-24
    uint32_t m = static_cast<uint32_t>(a);
    float rem = a - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t e = ((absu >> 23) - 112u) << 10;
  uint32_t m = (absu >> 13) & 0x3ffu;
  uint32_t rest = absu & 0x1fffu;
  uint32_t h = e | m;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
CGEMM_HD float fp16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0) {
    float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // 2^-24
    return sign ? -v : v;
  }
  if (e == 31) return bits_float(sign | 0x7f800000u | (m << 13));
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

/// splitmix64: a stateless 64-bit mix, enough for test inputs.
CGEMM_HD uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// normal(0, std) value for element `index` of the tensor generated from `seed`
/// (Box-Muller on two 24-bit uniforms drawn from the hash of (seed, index)).
CGEMM_HD float normal_value(uint64_t seed, uint64_t index, float std) {
  uint64_t h = mix64(mix64(seed) ^ index);
  float u1 = (static_cast<float>((h >> 40) & 0xffffffu) + 1.0f) * (1.0f / 16777217.0f);
  float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
  float r = sqrtf(-2.0f * logf(u1));
  return std * r * cosf(6.28318530717958647692f * u2);
}

}  // namespace cgemm::numeric
