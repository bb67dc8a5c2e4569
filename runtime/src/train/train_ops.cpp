// TrainOps' factory and argument checks (train_ops_impl.hpp).

#include <string>

#include "cgemm/core/error.hpp"
#include "train_ops_impl.hpp"

namespace cgemm {

std::unique_ptr<TrainOps> TrainOps::for_backend(Backend& be) {
  const std::string name = be.name();
  if (name == "cpu") return detail::make_cpu_train_ops();
#if defined(CGEMM_HAVE_CUDA)
  if (name == "cuda") return detail::make_cuda_train_ops(be);
#endif
  throw Error("TrainOps: no elementwise training kernels for the " + name + " backend");
}

namespace detail {

void check_train_args(const char* op, DType t, int64_t n) {
  if (t != DType::kFloat32 && t != DType::kBFloat16 && t != DType::kFloat16) {
    throw Error(std::string("TrainOps::") + op + ": dtype " + std::string(dtype_name(t)) +
                " is not supported (fp32, bf16 or fp16)");
  }
  if (n < 0) {
    throw Error(std::string("TrainOps::") + op + ": negative element count " + std::to_string(n));
  }
}

void check_optimizer_step(const OptimizerStep& s) {
  check_train_args("optimizer_step (grad)", s.grad_dtype, s.n);
  check_train_args("optimizer_step (value)", s.value_dtype, s.n);
  if (s.n > 0 && (s.master == nullptr || s.grad == nullptr || s.value == nullptr)) {
    throw Error("TrainOps::optimizer_step: null master, grad or value buffer");
  }
  if (s.kind == OptimizerStep::Kind::kAdam) {
    if (s.n > 0 && (s.m == nullptr || s.v == nullptr)) {
      throw Error("TrainOps::optimizer_step: Adam needs its moment buffers m and v");
    }
    if (s.step < 1) {
      throw Error("TrainOps::optimizer_step: Adam's step counts from 1, got " +
                  std::to_string(s.step));
    }
  } else if (s.kind != OptimizerStep::Kind::kSgd) {
    throw Error("TrainOps::optimizer_step: unknown optimizer kind " +
                std::to_string(static_cast<int>(s.kind)));
  }
}

}  // namespace detail
}  // namespace cgemm
