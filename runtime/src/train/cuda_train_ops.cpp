// The CUDA backend's TrainOps: the kernels of cuda/train_kernels.cu on the backend's stream 0,
// asynchronous except squared_error, which brings its per-block sums back to the host.

#include <cuda_runtime_api.h>

#include <cmath>
#include <string>
#include <vector>

#include "../cuda/train_kernels.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "train_ops_impl.hpp"

namespace cgemm::detail {
namespace {

class CudaTrainOps final : public TrainOps {
 public:
  explicit CudaTrainOps(Backend& be)
      : be_(be),
        stream_(static_cast<cudaStream_t>(be.native_stream())),
        partials_(static_cast<double*>(be.allocate(sizeof(double) * cuda::kMaxLossBlocks))) {}
  ~CudaTrainOps() override { be_.release(partials_); }
  CudaTrainOps(const CudaTrainOps&) = delete;
  CudaTrainOps& operator=(const CudaTrainOps&) = delete;

  void gelu(const void* pre, void* h, DType t, int64_t n) override {
    check_train_args("gelu", t, n);
    check(cuda::launch_gelu(pre, h, t, n, stream_), "gelu", n);
  }

  void gelu_backward(const void* dh, const void* pre, void* dpre, DType t, int64_t n) override {
    check_train_args("gelu_backward", t, n);
    check(cuda::launch_gelu_backward(dh, pre, dpre, t, n, stream_), "gelu_backward", n);
  }

  void add_to_f32(const void* a, const void* b, DType t, float* target, int64_t n) override {
    check_train_args("add_to_f32", t, n);
    check(cuda::launch_add_to_f32(a, b, t, target, n, stream_), "add_to_f32", n);
  }

  double squared_error(const void* out, const void* x, const float* target, void* dy, DType t,
                       int64_t n, double grad_scale) override {
    check_train_args("squared_error", t, n);
    int blocks = 0;
    check(cuda::launch_squared_error(out, x, target, dy, t, n, grad_scale, partials_, &blocks,
                                     stream_),
          "squared_error", n);
    std::vector<double> host(static_cast<size_t>(blocks));
    if (blocks > 0) {
      check_cuda(cudaMemcpyAsync(host.data(), partials_, sizeof(double) * host.size(),
                                 cudaMemcpyDeviceToHost, stream_),
                 "TrainOps::squared_error: cudaMemcpyAsync of the loss's partial sums");
      check_cuda(cudaStreamSynchronize(stream_), "TrainOps::squared_error: cudaStreamSynchronize");
    }
    double sum = 0.0;
    for (double p : host) sum += p;
    return sum;
  }

  void optimizer_step(const OptimizerStep& s) override {
    check_optimizer_step(s);
    const bool adam = s.kind == OptimizerStep::Kind::kAdam;
    cuda::OptimizerArgs a{};
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
    a.omb1 = static_cast<float>(1.0 - s.beta1);
    a.omb2 = static_cast<float>(1.0 - s.beta2);
    a.c1 = static_cast<float>(1.0 - std::pow(s.beta1, s.step));
    a.c2 = static_cast<float>(1.0 - std::pow(s.beta2, s.step));
    a.adam = adam;
    check(cuda::launch_optimizer(a, stream_), "optimizer_step", s.n);
  }

 private:
  void check(cudaError_t rc, const char* op, int64_t n) const {
    check_cuda(
        rc, std::string("TrainOps::") + op + " kernel launch (" + std::to_string(n) + " elements)");
  }

  Backend& be_;
  cudaStream_t stream_;
  double* partials_;
};

}  // namespace

std::unique_ptr<TrainOps> make_cuda_train_ops(Backend& be) {
  return std::make_unique<CudaTrainOps>(be);
}

}  // namespace cgemm::detail
