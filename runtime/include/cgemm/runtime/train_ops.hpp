#pragma once
// The elementwise steps of a training step (cgemm/runtime/elementwise.hpp) as calls on a
// backend's stream 0: what cgemm-train and a user's training loop call between the layers'
// collective GEMMs (tp_linear.hpp). Each call is one Backend::elementwise task, asynchronous on
// the CUDA backend and ordered after the GEMMs queued on stream 0; only squared_error waits, to
// bring the loss to the host (Backend::copy_to_host: for all the device's issued work).
//
// Conventions and errors: elementwise.hpp's (pointers are backend memory of `n` elements; t is
// fp32, bf16 or fp16; refusals name the call, e.g. "TrainOps::gelu: dtype ..."). Not
// thread-safe (it uses the backend's stream 0).

#include <cstdint>
#include <memory>

#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/elementwise.hpp"

namespace cgemm {

class TrainOps {
 public:
  /// Keeps a reference to `be`, which must outlive it; allocates the loss's partial sums
  /// (kLossPartials doubles of backend memory).
  explicit TrainOps(Backend& be);
  /// The same, on the heap.
  static std::unique_ptr<TrainOps> for_backend(Backend& be);
  ~TrainOps();
  TrainOps(const TrainOps&) = delete;
  TrainOps& operator=(const TrainOps&) = delete;

  /// h = GELU(pre). h may be pre.
  void gelu(const void* pre, void* h, DType t, int64_t n);
  /// dpre = dh * GELU'(pre). dpre may be dh.
  void gelu_backward(const void* dh, const void* pre, void* dpre, DType t, int64_t n);
  /// target = a + b, stored in fp32.
  void add_to_f32(const void* a, const void* b, DType t, float* target, int64_t n);
  /// The residual block's loss (SquaredErrorTask): dy = (out + x - target) * grad_scale, and
  /// the return value is the sum of (out + x - target)^2 over the n elements, in fp64 (the
  /// caller divides by the global count and sums over ranks). Synchronizes (the sum comes back
  /// to the host); a rerun gives the same bits.
  double squared_error(const void* out, const void* x, const float* target, void* dy, DType t,
                       int64_t n, double grad_scale);
  /// squared_error in two parts, for a step captured into a CUDA graph: the task alone (its
  /// sums left in backend memory; no host wait, capturable), then, after it ran, their sum
  /// (synchronizes). squared_error is exactly the two in turn.
  void squared_error_issue(const void* out, const void* x, const float* target, void* dy, DType t,
                           int64_t n, double grad_scale);
  double loss_sum();
  /// The optimizer update (OptimizerStep).
  void optimizer_step(const OptimizerStep& s);

 private:
  Backend& be_;
  double* partials_;
};

}  // namespace cgemm
