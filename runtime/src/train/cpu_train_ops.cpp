// The CPU backend's TrainOps: host loops over the backend's (host) memory, in double, in
// element order (so the loss's sum has a fixed order).

#include <cmath>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "train_math.hpp"
#include "train_ops_impl.hpp"

namespace cgemm::detail {
namespace {

std::vector<float> floats(const void* src, DType t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  convert_to_float(src, t, out.data(), n);
  return out;
}

class CpuTrainOps final : public TrainOps {
 public:
  void gelu(const void* pre, void* h, DType t, int64_t n) override {
    check_train_args("gelu", t, n);
    std::vector<float> z = floats(pre, t, n);
    for (float& v : z) v = static_cast<float>(train_math::gelu<double>(v));
    convert_from_float(z.data(), h, t, n);
  }

  void gelu_backward(const void* dh, const void* pre, void* dpre, DType t, int64_t n) override {
    check_train_args("gelu_backward", t, n);
    std::vector<float> g = floats(dh, t, n);
    const std::vector<float> z = floats(pre, t, n);
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = static_cast<float>(static_cast<double>(g[i]) * train_math::gelu_grad<double>(z[i]));
    }
    convert_from_float(g.data(), dpre, t, n);
  }

  void add_to_f32(const void* a, const void* b, DType t, float* target, int64_t n) override {
    check_train_args("add_to_f32", t, n);
    const std::vector<float> va = floats(a, t, n), vb = floats(b, t, n);
    for (size_t i = 0; i < va.size(); ++i) target[i] = va[i] + vb[i];
  }

  double squared_error(const void* out, const void* x, const float* target, void* dy, DType t,
                       int64_t n, double grad_scale) override {
    check_train_args("squared_error", t, n);
    const std::vector<float> o = floats(out, t, n), xv = floats(x, t, n);
    std::vector<float> g(static_cast<size_t>(n));
    double sum = 0.0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double d =
          static_cast<double>(o[i]) + static_cast<double>(xv[i]) - static_cast<double>(target[i]);
      sum += d * d;
      g[i] = static_cast<float>(d * grad_scale);
    }
    convert_from_float(g.data(), dy, t, n);
    return sum;
  }

  void optimizer_step(const OptimizerStep& s) override {
    check_optimizer_step(s);
    const std::vector<float> g = floats(s.grad, s.grad_dtype, s.n);
    if (s.kind == OptimizerStep::Kind::kSgd) {
      for (size_t i = 0; i < g.size(); ++i) {
        s.master[i] = static_cast<float>(s.master[i] - s.lr * g[i]);
      }
    } else {
      const double c1 = 1.0 - std::pow(s.beta1, s.step), c2 = 1.0 - std::pow(s.beta2, s.step);
      for (size_t i = 0; i < g.size(); ++i) {
        train_math::adam<double>(s.master[i], s.m[i], s.v[i], g[i], s.lr, s.beta1, s.beta2,
                                 1.0 - s.beta1, 1.0 - s.beta2, s.eps, c1, c2);
      }
    }
    convert_from_float(s.master, s.value, s.value_dtype, s.n);
  }
};

}  // namespace

std::unique_ptr<TrainOps> make_cpu_train_ops() { return std::make_unique<CpuTrainOps>(); }

}  // namespace cgemm::detail
