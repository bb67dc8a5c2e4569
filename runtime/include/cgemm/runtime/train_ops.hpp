#pragma once
// The elementwise steps of a training step, on a backend's memory: the activation between the
// tensor-parallel layers (GELU) and its derivative, the residual and the mean-squared-error
// loss with its gradient, and the optimizer updates (SGD, Adam) of fp32 master weights. They
// run where the layers' GEMMs run (the CPU backend: host loops; the CUDA backend: kernels on
// stream 0, asynchronous, ordered after the GEMMs queued there), so a training step makes no
// host round trip for them. The GEMMs and collectives are the layers' (tp_linear.hpp).
//
// Conventions: every pointer is backend memory (Backend::allocate) holding `n` elements,
// row-major; "DType t" is the element type of the activations and gradients (fp32, bf16 or
// fp16) and every value is computed in fp32 (CUDA) or fp64 (CPU: then rounded to fp32, then
// to t) before it is stored. Inputs and
// outputs may be the same buffer only where a function says so. GELU is the exact one,
// z * Phi(z) (erf), as torch.nn.functional.gelu's default (not the tanh approximation).
//
// Errors: cgemm::Error for a dtype other than fp32, bf16 or fp16, a negative n, or a failed
// kernel launch (named with the op). Not thread-safe (it uses the backend's stream 0).

#include <cstdint>
#include <memory>

#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/backend.hpp"

namespace cgemm {

/// One optimizer step over `n` parameters: master (fp32) updated in place from grad, then
/// rounded into value (value_dtype) for the next forward pass.
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
};

class TrainOps {
 public:
  /// The implementation for `be` (its name(): "cpu" or "cuda"); it keeps a reference to `be`,
  /// which must outlive it.
  static std::unique_ptr<TrainOps> for_backend(Backend& be);
  virtual ~TrainOps() = default;

  /// h = GELU(pre). h may be pre.
  virtual void gelu(const void* pre, void* h, DType t, int64_t n) = 0;
  /// dpre = dh * GELU'(pre), GELU'(z) = Phi(z) + z phi(z). dpre may be dh.
  virtual void gelu_backward(const void* dh, const void* pre, void* dpre, DType t, int64_t n) = 0;
  /// target = a + b, stored in fp32 (a residual's target, kept unrounded).
  virtual void add_to_f32(const void* a, const void* b, DType t, float* target, int64_t n) = 0;
  /// The residual block's loss: y = out + x, d = y - target; dy = d * grad_scale (in t) and
  /// the return value is the sum of d^2 over the n elements, in fp64 (the caller divides by
  /// the global count and sums over ranks). Synchronizes (the sum comes back to the host);
  /// the sum's order is fixed for a given n and buffers (their alignment picks the CUDA grid), so
  /// a rerun gives the same bits.
  virtual double squared_error(const void* out, const void* x, const float* target, void* dy,
                               DType t, int64_t n, double grad_scale) = 0;
  /// The optimizer update (OptimizerStep). grad must not overlap master, m, v or value.
  virtual void optimizer_step(const OptimizerStep& s) = 0;
};

}  // namespace cgemm
