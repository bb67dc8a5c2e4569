#pragma once
// The per-element formulas of the elementwise tasks (cgemm/runtime/elementwise.hpp), written
// once for the CPU backend's host loops (cpu_elementwise.cpp) and the CUDA kernels
// (cuda/train_kernels.cu, compiled by nvcc as __host__ __device__). T is the compute type: the
// CPU backend computes in double, the kernels in float; both round once on store. Kept C++17 so
// the .cu files can include it.

#include <cmath>

#include "cgemm/core/convert.hpp"  // CGEMM_HD

namespace cgemm::elementwise_math {

template <class T>
CGEMM_HD T erfc_of(T z) {
#if defined(__CUDA_ARCH__)
  return erfc(z);
#else
  return std::erfc(z);
#endif
}
template <class T>
CGEMM_HD T exp_of(T z) {
#if defined(__CUDA_ARCH__)
  return exp(z);
#else
  return std::exp(z);
#endif
}
template <class T>
CGEMM_HD T sqrt_of(T z) {
#if defined(__CUDA_ARCH__)
  return sqrt(z);
#else
  return std::sqrt(z);
#endif
}

constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

/// Phi(z), the standard normal's distribution function, as erfc(-z / sqrt 2) / 2: the form
/// 1 + erf(z / sqrt 2) cancels for negative z (in fp32 it keeps no correct digit below -5).
template <class T>
CGEMM_HD T normal_cdf(T z) {
  return T(0.5) * erfc_of(-z * T(kInvSqrt2));
}

/// GELU(z) = z Phi(z), the exact (erf) form.
template <class T>
CGEMM_HD T gelu(T z) {
  return z * normal_cdf(z);
}

/// GELU'(z) = Phi(z) + z phi(z).
template <class T>
CGEMM_HD T gelu_grad(T z) {
  return normal_cdf(z) + z * T(kInvSqrt2Pi) * exp_of(T(-0.5) * z * z);
}

/// One Adam update of one parameter (torch.optim.Adam without weight decay): m and v are the
/// moments, updated in place; omb1 = 1 - beta1 and omb2 = 1 - beta2 (the caller computes them
/// in double: 1 - float(0.999) is 1.3e-5 relative off, a bias in every early step), c1 =
/// 1 - beta1^t and c2 = 1 - beta2^t the bias corrections.
template <class T>
CGEMM_HD void adam(float& master, float& m, float& v, T g, T lr, T beta1, T beta2, T omb1, T omb2,
                   T eps, T c1, T c2) {
  const T mn = beta1 * T(m) + omb1 * g;
  const T vn = beta2 * T(v) + omb2 * g * g;
  m = static_cast<float>(mn);
  v = static_cast<float>(vn);
  master = static_cast<float>(T(master) - lr * (mn / c1) / (sqrt_of(vn / c2) + eps));
}

}  // namespace cgemm::elementwise_math
