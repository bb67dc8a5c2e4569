// The elementwise tasks' names and argument checks (cgemm/runtime/elementwise.hpp), shared by
// every backend so all refuse the same input with the same message.

#include "cgemm/runtime/elementwise.hpp"

#include <string>

#include "cgemm/core/error.hpp"
#include "overloaded.hpp"

namespace cgemm {

namespace {

void check_dtype_and_count(const char* op, DType t, int64_t n) {
  if (t != DType::kFloat32 && t != DType::kBFloat16 && t != DType::kFloat16) {
    throw Error(std::string("TrainOps::") + op + ": dtype " + std::string(dtype_name(t)) +
                " is not supported (fp32, bf16 or fp16)");
  }
  if (n < 0) {
    throw Error(std::string("TrainOps::") + op + ": negative element count " + std::to_string(n));
  }
}

void check_buffers(const char* op, int64_t n, std::initializer_list<const void*> buffers) {
  if (n == 0) return;
  for (const void* b : buffers) {
    if (b == nullptr) throw Error(std::string("TrainOps::") + op + ": null buffer");
  }
}

void check_optimizer_step(const OptimizerStep& s) {
  check_dtype_and_count("optimizer_step (grad)", s.grad_dtype, s.n);
  check_dtype_and_count("optimizer_step (value)", s.value_dtype, s.n);
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

}  // namespace

const char* elementwise_name(const ElementwiseTask& t) {
  return std::visit(Overloaded{[](const GeluTask&) { return "gelu"; },
                               [](const GeluBackwardTask&) { return "gelu_backward"; },
                               [](const AddToF32Task&) { return "add_to_f32"; },
                               [](const SquaredErrorTask&) { return "squared_error"; },
                               [](const OptimizerStep&) { return "optimizer_step"; }},
                    t);
}

void check_elementwise(const ElementwiseTask& task) {
  std::visit(Overloaded{[](const GeluTask& t) {
                          check_dtype_and_count("gelu", t.dtype, t.n);
                          check_buffers("gelu", t.n, {t.pre, t.h});
                        },
                        [](const GeluBackwardTask& t) {
                          check_dtype_and_count("gelu_backward", t.dtype, t.n);
                          check_buffers("gelu_backward", t.n, {t.dh, t.pre, t.dpre});
                        },
                        [](const AddToF32Task& t) {
                          check_dtype_and_count("add_to_f32", t.dtype, t.n);
                          check_buffers("add_to_f32", t.n, {t.a, t.b, t.target});
                        },
                        [](const SquaredErrorTask& t) {
                          check_dtype_and_count("squared_error", t.dtype, t.n);
                          check_buffers("squared_error", t.n, {t.out, t.x, t.target, t.dy});
                          // The partials are written even for n = 0 (all zeros).
                          check_buffers("squared_error", 1, {t.partials});
                        },
                        [](const OptimizerStep& s) { check_optimizer_step(s); }},
             task);
}

}  // namespace cgemm
