#pragma once
// The kernels of the CUDA backend's elementwise tasks (elementwise.cpp; the
// formulas in runtime/src/elementwise_math.hpp). Each launcher returns the launch's
// cudaError_t; the caller checks the arguments first and names the op in its error. Kept
// C++17 (compiled by nvcc).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cgemm/core/dtype.hpp"

namespace cgemm::cuda {

/// The most blocks launch_squared_error uses, so `partials` holds at most this many doubles.
constexpr int kMaxLossBlocks = 1024;

cudaError_t launch_gelu(const void* pre, void* h, DType t, int64_t n, cudaStream_t stream);
cudaError_t launch_gelu_backward(const void* dh, const void* pre, void* dpre, DType t, int64_t n,
                                 cudaStream_t stream);
cudaError_t launch_add_to_f32(const void* a, const void* b, DType t, float* target, int64_t n,
                              cudaStream_t stream);
/// dy = (out + x - target) * grad_scale; partials[b] = block b's sum of (out + x - target)^2
/// in double, for b < *blocks (set by the call; depends on n and on the buffers' alignment).
cudaError_t launch_squared_error(const void* out, const void* x, const float* target, void* dy,
                                 DType t, int64_t n, double grad_scale, double* partials,
                                 int* blocks, cudaStream_t stream);
/// SGD (m, v null) or Adam (c1, c2: the bias corrections 1 - beta^step) on fp32 master, then
/// value = master rounded to value_dtype.
struct OptimizerArgs {
  float* master;
  float* m;
  float* v;
  const void* grad;
  DType grad_dtype;
  void* value;
  DType value_dtype;
  int64_t n;
  float lr, beta1, beta2, eps, c1, c2;
  float omb1, omb2;  // 1 - beta1, 1 - beta2, computed in double
  // Device memory {1 - beta1^step, 1 - beta2^step} read instead of c1, c2 (rounded to float
  // alike) when set: OptimizerStep::bias_corrections.
  const double* corrections;
  bool adam;
};
cudaError_t launch_optimizer(const OptimizerArgs& a, cudaStream_t stream);

}  // namespace cgemm::cuda
