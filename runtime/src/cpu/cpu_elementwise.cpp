// The CPU backend's elementwise tasks (cpu_elementwise.hpp).

#include "cpu_elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "elementwise_math.hpp"
#include "overloaded.hpp"

namespace cgemm::cpu {

namespace {

namespace math = elementwise_math;

std::vector<float> floats(const void* src, DType t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  convert_to_float(src, t, out.data(), n);
  return out;
}

void gelu(const GeluTask& t) {
  std::vector<float> z = floats(t.pre, t.dtype, t.n);
  for (float& v : z) v = static_cast<float>(math::gelu<double>(v));
  convert_from_float(z.data(), t.h, t.dtype, t.n);
}

void gelu_backward(const GeluBackwardTask& t) {
  std::vector<float> g = floats(t.dh, t.dtype, t.n);
  const std::vector<float> z = floats(t.pre, t.dtype, t.n);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = static_cast<float>(static_cast<double>(g[i]) * math::gelu_grad<double>(z[i]));
  }
  convert_from_float(g.data(), t.dpre, t.dtype, t.n);
}

void add_to_f32(const AddToF32Task& t) {
  const std::vector<float> va = floats(t.a, t.dtype, t.n), vb = floats(t.b, t.dtype, t.n);
  for (size_t i = 0; i < va.size(); ++i) t.target[i] = va[i] + vb[i];
}

void squared_error(const SquaredErrorTask& t) {
  const std::vector<float> o = floats(t.out, t.dtype, t.n), xv = floats(t.x, t.dtype, t.n);
  std::vector<float> g(static_cast<size_t>(t.n));
  double sum = 0.0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double d =
        static_cast<double>(o[i]) + static_cast<double>(xv[i]) - static_cast<double>(t.target[i]);
    sum += d * d;
    g[i] = static_cast<float>(d * t.grad_scale);
  }
  convert_from_float(g.data(), t.dy, t.dtype, t.n);
  // One partial: the whole sum in element order.
  std::fill(t.partials, t.partials + kLossPartials, 0.0);
  t.partials[0] = sum;
}

void optimizer_step(const OptimizerStep& s) {
  const std::vector<float> g = floats(s.grad, s.grad_dtype, s.n);
  if (s.kind == OptimizerStep::Kind::kSgd) {
    for (size_t i = 0; i < g.size(); ++i) {
      s.master[i] = static_cast<float>(s.master[i] - s.lr * g[i]);
    }
  } else {
    const double* bc = s.bias_corrections;
    const double c1 = bc != nullptr ? bc[0] : 1.0 - std::pow(s.beta1, s.step);
    const double c2 = bc != nullptr ? bc[1] : 1.0 - std::pow(s.beta2, s.step);
    for (size_t i = 0; i < g.size(); ++i) {
      math::adam<double>(s.master[i], s.m[i], s.v[i], g[i], s.lr, s.beta1, s.beta2, 1.0 - s.beta1,
                         1.0 - s.beta2, s.eps, c1, c2);
    }
  }
  convert_from_float(s.master, s.value, s.value_dtype, s.n);
}

}  // namespace

void run_elementwise(const ElementwiseTask& t) {
  check_elementwise(t);
  std::visit(Overloaded{[](const GeluTask& x) { gelu(x); },
                        [](const GeluBackwardTask& x) { gelu_backward(x); },
                        [](const AddToF32Task& x) { add_to_f32(x); },
                        [](const SquaredErrorTask& x) { squared_error(x); },
                        [](const OptimizerStep& x) { optimizer_step(x); }},
             t);
}

}  // namespace cgemm::cpu
