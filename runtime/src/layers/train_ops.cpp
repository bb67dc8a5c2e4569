// TrainOps (train_ops.hpp): each call one elementwise task on the backend's stream 0.

#include "cgemm/runtime/train_ops.hpp"

#include <vector>

namespace cgemm {

TrainOps::TrainOps(Backend& be)
    : be_(be), partials_(static_cast<double*>(be.allocate(sizeof(double) * kLossPartials))) {}

std::unique_ptr<TrainOps> TrainOps::for_backend(Backend& be) {
  return std::make_unique<TrainOps>(be);
}

TrainOps::~TrainOps() { be_.release(partials_); }

void TrainOps::gelu(const void* pre, void* h, DType t, int64_t n) {
  be_.elementwise(GeluTask{.pre = pre, .h = h, .dtype = t, .n = n}, 0);
}

void TrainOps::gelu_backward(const void* dh, const void* pre, void* dpre, DType t, int64_t n) {
  be_.elementwise(GeluBackwardTask{.dh = dh, .pre = pre, .dpre = dpre, .dtype = t, .n = n}, 0);
}

void TrainOps::add_to_f32(const void* a, const void* b, DType t, float* target, int64_t n) {
  be_.elementwise(AddToF32Task{.a = a, .b = b, .dtype = t, .target = target, .n = n}, 0);
}

double TrainOps::squared_error(const void* out, const void* x, const float* target, void* dy,
                               DType t, int64_t n, double grad_scale) {
  squared_error_issue(out, x, target, dy, t, n, grad_scale);
  return loss_sum();
}

void TrainOps::squared_error_issue(const void* out, const void* x, const float* target, void* dy,
                                   DType t, int64_t n, double grad_scale) {
  be_.elementwise(SquaredErrorTask{.out = out,
                                   .x = x,
                                   .target = target,
                                   .dy = dy,
                                   .dtype = t,
                                   .n = n,
                                   .grad_scale = grad_scale,
                                   .partials = partials_},
                  0);
}

double TrainOps::loss_sum() {
  std::vector<double> host(kLossPartials);
  be_.copy_to_host(host.data(), partials_, sizeof(double) * host.size());
  double sum = 0.0;
  for (double p : host) sum += p;
  return sum;
}

void TrainOps::optimizer_step(const OptimizerStep& s) { be_.elementwise(s, 0); }

}  // namespace cgemm
