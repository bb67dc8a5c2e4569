#pragma once
// What the TrainOps implementations share (private to runtime/): their factories and the
// argument checks, so both backends refuse the same input with the same message.

#include <cstdint>
#include <memory>

#include "cgemm/runtime/train_ops.hpp"

namespace cgemm::detail {

/// The CPU backend's TrainOps (cpu_train_ops.cpp): host loops in double.
std::unique_ptr<TrainOps> make_cpu_train_ops();
/// The CUDA backend's (cuda_train_ops.cpp, kernels in cuda/train_kernels.cu): kernels on the backend's stream 0. CUDA builds only.
std::unique_ptr<TrainOps> make_cuda_train_ops(Backend& be);

/// Throws cgemm::Error naming `op` unless t is fp32, bf16 or fp16 and n >= 0.
void check_train_args(const char* op, DType t, int64_t n);
/// check_train_args for both dtypes of an OptimizerStep, plus its pointers (Adam's moments
/// only for Adam) and its kind.
void check_optimizer_step(const OptimizerStep& s);

}  // namespace cgemm::detail
