// The CUDA backend's elementwise tasks (cgemm/runtime/elementwise.hpp): the kernels of
// train_kernels.cu on a compute stream, asynchronous. Not traced: a trace is laid out by the
// collective GEMMs a launcher traces, and these run between them.

#include <cuda_runtime_api.h>

#include <cmath>
#include <string>

#include "compute.hpp"
#include "overloaded.hpp"
#include "train_kernels.hpp"

namespace cgemm::cuda {

static_assert(kMaxLossBlocks <= kLossPartials, "the loss's partials must hold every block's sum");

namespace {

cudaError_t launch(const GeluTask& t, cudaStream_t st) {
  return launch_gelu(t.pre, t.h, t.dtype, t.n, st);
}
cudaError_t launch(const GeluBackwardTask& t, cudaStream_t st) {
  return launch_gelu_backward(t.dh, t.pre, t.dpre, t.dtype, t.n, st);
}
cudaError_t launch(const AddToF32Task& t, cudaStream_t st) {
  return launch_add_to_f32(t.a, t.b, t.dtype, t.target, t.n, st);
}
cudaError_t launch(const SquaredErrorTask& t, cudaStream_t st) {
  // The kernel writes one sum per block it runs; the rest stay 0, so the loss is the sum of all
  // kLossPartials in order whatever the grid.
  if (const cudaError_t rc = cudaMemsetAsync(t.partials, 0, sizeof(double) * kLossPartials, st);
      rc != cudaSuccess) {
    return rc;
  }
  int blocks = 0;
  return launch_squared_error(t.out, t.x, t.target, t.dy, t.dtype, t.n, t.grad_scale, t.partials,
                              &blocks, st);
}
cudaError_t launch(const OptimizerStep& s, cudaStream_t st) {
  const bool adam = s.kind == OptimizerStep::Kind::kAdam;
  OptimizerArgs a{};
  a.master = s.master;
  a.m = adam ? s.m : nullptr;
  a.v = adam ? s.v : nullptr;
  a.grad = s.grad;
  a.grad_dtype = s.grad_dtype;
  a.value = s.value;
  a.value_dtype = s.value_dtype;
  a.n = s.n;
  a.lr = static_cast<float>(s.lr);
  a.beta1 = static_cast<float>(s.beta1);
  a.beta2 = static_cast<float>(s.beta2);
  a.eps = static_cast<float>(s.eps);
  // In double: 1 - float(0.999) is 1.3e-5 relative off, a bias in every early step.
  a.omb1 = static_cast<float>(1.0 - s.beta1);
  a.omb2 = static_cast<float>(1.0 - s.beta2);
  a.c1 = static_cast<float>(1.0 - std::pow(s.beta1, s.step));
  a.c2 = static_cast<float>(1.0 - std::pow(s.beta2, s.step));
  a.corrections = adam ? s.bias_corrections : nullptr;
  a.adam = adam;
  return launch_optimizer(a, st);
}

int64_t count(const ElementwiseTask& t) {
  return std::visit([](const auto& x) { return x.n; }, t);
}

}  // namespace

void Compute::elementwise(const ElementwiseTask& task, int s) {
  check_elementwise(task);
  cudaStream_t st = streams_.at(s, "elementwise");
  const cudaError_t rc = std::visit([&](const auto& t) { return launch(t, st); }, task);
  // The message is built only on failure: this runs several times per training step.
  if (rc != cudaSuccess) {
    check_cuda(rc,
               std::string("TrainOps::") + elementwise_name(task) + " kernel launch (" +
                   std::to_string(count(task)) + " elements)",
               where_);
  }
}

}  // namespace cgemm::cuda
