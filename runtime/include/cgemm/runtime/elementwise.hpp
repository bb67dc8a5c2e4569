#pragma once
// The elementwise steps of a training step, as tasks a Backend runs (Backend::elementwise):
// the activation between the tensor-parallel layers (GELU) and its derivative, the residual's
// target and the mean-squared-error loss with its gradient, and the optimizer updates (SGD,
// Adam) of fp32 master weights. They run where the layers' GEMMs run (the CPU backend: host
// loops; the CUDA backend: kernels on the named compute stream, asynchronous), so none of them
// makes a host round trip; the loss's sum stays in backend memory until its caller copies it.
//
// Conventions: every pointer is backend memory (Backend::allocate) holding `n` elements,
// row-major; `dtype` is the element type of the activations and gradients (fp32, bf16 or fp16)
// and every value is computed in fp32 (CUDA) or fp64 (CPU: then rounded to fp32, then to
// dtype) before it is stored. Inputs and outputs may be the same buffer only where a task says
// so. GELU is the exact one, z * Phi(z) (erf), as torch.nn.functional.gelu's default (not the
// tanh approximation).
//
// Errors: check_elementwise's cgemm::Error (a dtype other than fp32, bf16 or fp16, a negative
// n, a missing buffer), named with the task, the same on every backend; a failed kernel launch.

#include <cstdint>
#include <variant>

#include "cgemm/core/dtype.hpp"

namespace cgemm {

/// h = GELU(pre). h may be pre.
struct GeluTask {
  const void* pre = nullptr;
  void* h = nullptr;
  DType dtype = DType::kFloat32;
  int64_t n = 0;
};

/// dpre = dh * GELU'(pre), GELU'(z) = Phi(z) + z phi(z). dpre may be dh.
struct GeluBackwardTask {
  const void* dh = nullptr;
  const void* pre = nullptr;
  void* dpre = nullptr;
  DType dtype = DType::kFloat32;
  int64_t n = 0;
};

/// target = a + b, stored in fp32 (a residual's target, kept unrounded).
struct AddToF32Task {
  const void* a = nullptr;
  const void* b = nullptr;
  DType dtype = DType::kFloat32;
  float* target = nullptr;
  int64_t n = 0;
};

/// How many doubles SquaredErrorTask::partials holds.
inline constexpr int kLossPartials = 1024;

/// The residual block's loss: y = out + x, d = y - target; dy = d * grad_scale (in dtype), and
/// the sum of d^2 over the n elements, in fp64, left in `partials` (kLossPartials doubles of
/// backend memory): the loss is their sum in index order (unused ones are 0). The split into
/// partials is fixed for a given n and buffers (their alignment picks the CUDA grid), so a rerun
/// gives the same bits.
struct SquaredErrorTask {
  const void* out = nullptr;
  const void* x = nullptr;
  const float* target = nullptr;
  void* dy = nullptr;
  DType dtype = DType::kFloat32;
  int64_t n = 0;
  double grad_scale = 1.0;
  double* partials = nullptr;
};

/// One optimizer step over `n` parameters: master (fp32) updated in place from grad, then
/// rounded into value (value_dtype) for the next forward pass. grad must not overlap master,
/// m, v or value.
struct OptimizerStep {
  enum class Kind { kSgd, kAdam } kind = Kind::kAdam;
  float* master = nullptr;  // fp32 [n]
  float* m = nullptr;       // Adam's first and second moments, fp32 [n] each (kAdam only;
  float* v = nullptr;       // start them at zero)
  const void* grad = nullptr;
  DType grad_dtype = DType::kFloat32;
  void* value = nullptr;
  DType value_dtype = DType::kFloat32;
  int64_t n = 0;
  double lr = 1e-3;
  // Adam (torch.optim.Adam's defaults and bias correction); `step` counts from 1.
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int step = 1;
  // Adam: where the task reads the bias corrections 1 - beta1^step and 1 - beta2^step (two
  // doubles of backend memory) instead of computing them from `step`; null: from `step`. What
  // a step captured into a CUDA graph uses: the values change every step, the graph does not.
  const double* bias_corrections = nullptr;
};

using ElementwiseTask =
    std::variant<GeluTask, GeluBackwardTask, AddToF32Task, SquaredErrorTask, OptimizerStep>;

/// "gelu", "gelu_backward", "add_to_f32", "squared_error" or "optimizer_step": the name
/// errors and traces give the task (TrainOps' call of the same name).
const char* elementwise_name(const ElementwiseTask& t);

/// Throws cgemm::Error naming the task ("TrainOps::gelu: ...") unless its dtypes are fp32, bf16 or
/// fp16, n >= 0 and (for n > 0) its buffers are set (Adam's moments only for Adam, whose step
/// counts from 1). Every backend calls it before it runs a task, so all refuse the same input
/// alike.
void check_elementwise(const ElementwiseTask& t);

}  // namespace cgemm
