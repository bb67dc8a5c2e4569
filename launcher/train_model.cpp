// cgemm-train's model (train_model.hpp): the student and teacher blocks on the layer pair, the
// host's elementwise steps and the optimizers.

#include "train_model.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/watchdog.hpp"
#include "trace_writer.hpp"

namespace cgemm::launcher {

namespace {

constexpr uint64_t kTeacherSeed = 1000;   // the teacher's weights: seed + this + k
constexpr uint64_t kInputSeed = 1000000;  // step i's x: seed + this + i
constexpr float kBiasStd = 0.1f;
constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;

size_t bytes_of(int64_t n, DType t) { return static_cast<size_t>(n) * dtype_size(t); }

double gelu(double z) { return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))); }
// d/dz of z * Phi(z): Phi(z) + z * phi(z).
double gelu_grad(double z) {
  const double phi = std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi);
  return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * phi;
}

std::vector<float> to_host(Backend& be, const void* src, DType t, int64_t n) {
  std::vector<char> raw(bytes_of(n, t));
  be.copy_to_host(raw.data(), src, raw.size());
  std::vector<float> out(static_cast<size_t>(n));
  convert_to_float(raw.data(), t, out.data(), n);
  return out;
}

void from_host(Backend& be, void* dst, const std::vector<float>& src, DType t) {
  const auto n = static_cast<int64_t>(src.size());
  std::vector<char> raw(bytes_of(n, t));
  convert_from_float(src.data(), raw.data(), t, n);
  be.copy_from_host(dst, raw.data(), raw.size());
}

using Clock = std::chrono::steady_clock;

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::kInputs:
      return "inputs";
    case Phase::kTargets:
      return "targets (teacher forward)";
    case Phase::kUpForward:
      return "up_proj forward (all-gather GEMM)";
    case Phase::kGelu:
      return "GELU (host)";
    case Phase::kDownForward:
      return "down_proj forward (reduce-scatter GEMM)";
    case Phase::kLoss:
      return "residual + loss (host, loss all-reduce)";
    case Phase::kDownBackward:
      return "down_proj backward (all-gather dgrad GEMM, wgrad)";
    case Phase::kGeluBackward:
      return "GELU backward (host)";
    case Phase::kUpBackward:
      return "up_proj backward (reduce-scatter dgrad GEMM, wgrad)";
    case Phase::kDpAllReduce:
      return "dp gradient all-reduce (MPI)";
    case Phase::kOptimizer:
      return "optimizer (host)";
    case Phase::kCount:
      break;
  }
  return "?";
}

/// A weight or bias: its backend copy in dtype, its gradient, and (student only) the fp32
/// master copy and Adam's moments on the host.
struct MlpTrainer::Param {
  std::string name;
  int64_t n = 0;  // local elements
  detail::BackendMemory value, grad;
  std::vector<float> master, m, v;
  Param(Backend& be, std::string nm, const Shape& local, DType t)
      : name(std::move(nm)),
        n(num_elements(local)),
        value(be, bytes_of(n, t)),
        grad(be, bytes_of(n, t)) {}
};

MlpTrainer::MlpTrainer(Context& ctx, const TrainConfig& cfg) : ctx_(ctx), cfg_(cfg) {
  TpLinearDesc d;
  d.batch = cfg.batch;
  d.seq_len = cfg.seq_len;
  d.dtype = cfg.dtype;
  d.bias = true;
  d.path = cfg.path;
  d.name = "up_proj";
  d.hidden_in = cfg.hidden;
  d.hidden_out = cfg.ffn;
  up_ = std::make_unique<ColumnParallelLinear>(ctx, d);
  d.name = "down_proj";
  d.hidden_in = cfg.ffn;
  d.hidden_out = cfg.hidden;
  down_ = std::make_unique<RowParallelLinear>(ctx, d);

  Backend& be = ctx.backend();
  const GemmPlan& upf = up_->forward_plan();
  const GemmPlan& downf = down_->forward_plan();
  if (upf.lhs_local() != downf.out_local() || upf.lhs_offset() != downf.out_offset()) {
    throw Error("cgemm-train: the block's input and output shards differ (" +
                shape_str(upf.lhs_local()) + " against " + shape_str(downf.out_local()) + ")");
  }
  n_x_ = num_elements(upf.lhs_local());
  n_pre_ = num_elements(upf.out_local());
  const auto buffer = [&](int64_t n) {
    buffers_.push_back(std::make_unique<detail::BackendMemory>(be, bytes_of(n, cfg.dtype)));
    return buffers_.back()->get();
  };
  x_ = buffer(n_x_);
  out_ = buffer(n_x_);
  dy_ = buffer(n_x_);
  dx_ = buffer(n_x_);
  pre_ = buffer(n_pre_);
  h_ = buffer(n_pre_);
  dh_ = buffer(n_pre_);
  dpre_ = buffer(n_pre_);

  // W1, b1, W2, b2: their global shapes and this rank's shards, from the forward plans.
  struct Spec {
    const char* name;
    const GemmPlan* plan;
    bool bias;
    float std;
  };
  const Spec specs[] = {
      {"W1", &upf, false, static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.hidden)))},
      {"b1", &upf, true, kBiasStd},
      {"W2", &downf, false, static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.ffn)))},
      {"b2", &downf, true, kBiasStd}};
  uint64_t k = 1;
  for (const Spec& s : specs) {
    const GemmDesc& gd = s.plan->desc();
    const Shape& global = s.bias ? *gd.bias_shape : gd.rhs_shape;
    const Shape& local = s.bias ? s.plan->bias_local() : s.plan->rhs_local();
    const Shape offset = s.bias ? s.plan->bias_offset() : s.plan->rhs_offset();
    // The student: fp32 master weights drawn by global index, then rounded to dtype.
    auto p = std::make_unique<Param>(be, s.name, local, cfg.dtype);
    detail::BackendMemory f32(be, bytes_of(p->n, DType::kFloat32));
    be.fill_normal(f32.get(), DType::kFloat32, global, local, offset, cfg.seed + k, s.std);
    p->master = to_host(be, f32.get(), DType::kFloat32, p->n);
    p->m.assign(p->master.size(), 0.0f);
    p->v.assign(p->master.size(), 0.0f);
    from_host(be, p->value.get(), p->master, cfg.dtype);
    params_.push_back(std::move(p));
    // The teacher: drawn in dtype, never updated.
    auto t = std::make_unique<Param>(be, std::string("teacher ") + s.name, local, cfg.dtype);
    be.fill_normal(t->value.get(), cfg.dtype, global, local, offset, cfg.seed + kTeacherSeed + k,
                   s.std);
    teacher_.push_back(std::move(t));
    ++k;
  }
  be.synchronize();
}

MlpTrainer::~MlpTrainer() = default;

void MlpTrainer::forward_student() {
  up_->forward(x_, params_[0]->value.get(), params_[1]->value.get(), pre_);
}

StepResult MlpTrainer::step(int step) {
  StepResult r = gradients(step);
  update(r);
  return r;
}

StepResult MlpTrainer::gradients(int step) {
  Backend& be = ctx_.backend();
  const DType t = cfg_.dtype;
  StepResult r;
  auto mark = Clock::now();
  const auto lap = [&](Phase p) {
    be.synchronize();
    const auto now = Clock::now();
    r.phase_ms[static_cast<int>(p)] +=
        std::chrono::duration<double, std::milli>(now - mark).count();
    mark = now;
  };
  const auto gelu_into_h = [&]() {
    pre_host_ = to_host(be, pre_, t, n_pre_);
    std::vector<float> h(pre_host_.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(gelu(pre_host_[i]));
    from_host(be, h_, h, t);
  };

  // inputs: x ~ N(0, 1), a fresh global batch per step.
  const GemmPlan& upf = up_->forward_plan();
  be.fill_normal(x_, t, upf.desc().lhs_shape, upf.lhs_local(), upf.lhs_offset(),
                 cfg_.seed + kInputSeed + static_cast<uint64_t>(step), 1.0f);
  x_host_ = to_host(be, x_, t, n_x_);
  lap(Phase::kInputs);

  // targets: the teacher's block on the same x (the residual included).
  up_->forward(x_, teacher_[0]->value.get(), teacher_[1]->value.get(), pre_);
  gelu_into_h();
  down_->forward(h_, teacher_[2]->value.get(), teacher_[3]->value.get(), out_);
  target_host_ = to_host(be, out_, t, n_x_);
  for (size_t i = 0; i < target_host_.size(); ++i) target_host_[i] += x_host_[i];
  lap(Phase::kTargets);

  // forward
  forward_student();
  lap(Phase::kUpForward);
  gelu_into_h();
  lap(Phase::kGelu);
  down_->forward(h_, params_[2]->value.get(), params_[3]->value.get(), out_);
  lap(Phase::kDownForward);

  // loss and dL/dy = 2 (y - target) / count, count the global elements.
  {
    const std::vector<float> out = to_host(be, out_, t, n_x_);
    const double count = static_cast<double>(cfg_.batch) * static_cast<double>(cfg_.seq_len) *
                         static_cast<double>(cfg_.hidden);
    double sum = 0.0;
    std::vector<float> dy(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const double y = static_cast<double>(out[i]) + static_cast<double>(x_host_[i]);
      const double diff = y - static_cast<double>(target_host_[i]);
      sum += diff * diff;
      dy[i] = static_cast<float>(2.0 * diff / count);
    }
    from_host(be, dy_, dy, t);
    const watchdog::WaitScope wait("the other ranks' loss of step " + std::to_string(step + 1));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, ctx_.comms().world()),
              "MPI_Allreduce(loss)");
    r.loss = sum / count;
  }
  lap(Phase::kLoss);

  // backward (x is not trained: the residual's gradient and dx are not needed further).
  down_->backward(h_, params_[2]->value.get(), dy_, dh_, params_[2]->grad.get(),
                  params_[3]->grad.get());
  lap(Phase::kDownBackward);
  {
    std::vector<float> dpre = to_host(be, dh_, t, n_pre_);
    for (size_t i = 0; i < dpre.size(); ++i) {
      dpre[i] = static_cast<float>(static_cast<double>(dpre[i]) * gelu_grad(pre_host_[i]));
    }
    from_host(be, dpre_, dpre, t);
  }
  lap(Phase::kGeluBackward);
  up_->backward(x_, params_[0]->value.get(), dpre_, dx_, params_[0]->grad.get(),
                params_[1]->grad.get());
  lap(Phase::kUpBackward);

  // The data-parallel sum: one fp32 buffer of every gradient, one MPI_Allreduce over dp after
  // the backward pass. A bucketed all-reduce overlapped with the backward is still to come.
  std::vector<float>& grads = grads_;
  grads.clear();
  for (const auto& p : params_) {
    const std::vector<float> g = to_host(be, p->grad.get(), t, p->n);
    grads.insert(grads.end(), g.begin(), g.end());
  }
  if (grads.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw Error("cgemm-train: " + std::to_string(grads.size()) +
                " gradient elements on one rank: more than one MPI_Allreduce takes");
  }
  if (ctx_.comms().dp() > 1) {
    const watchdog::WaitScope wait("the data-parallel gradient all-reduce of step " +
                                   std::to_string(step + 1));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(grads.size()), MPI_FLOAT,
                            MPI_SUM, ctx_.comms().dp_comm()),
              "MPI_Allreduce(gradients over dp)");
  }
  lap(Phase::kDpAllReduce);
  return r;
}

void MlpTrainer::update(StepResult& r) {
  Backend& be = ctx_.backend();
  const DType t = cfg_.dtype;
  const std::vector<float>& grads = grads_;
  const auto start = Clock::now();
  // optimizer: on the fp32 master weights, then rounded to dtype for the next step.
  ++adam_t_;
  const double lr = cfg_.lr;
  const double c1 = 1.0 - std::pow(kAdamBeta1, adam_t_), c2 = 1.0 - std::pow(kAdamBeta2, adam_t_);
  size_t at = 0;
  for (const auto& p : params_) {
    for (size_t i = 0; i < p->master.size(); ++i, ++at) {
      const double g = grads[at];
      if (cfg_.optimizer == Optimizer::kSgd) {
        p->master[i] = static_cast<float>(p->master[i] - lr * g);
      } else {
        const double m = kAdamBeta1 * p->m[i] + (1.0 - kAdamBeta1) * g;
        const double v = kAdamBeta2 * p->v[i] + (1.0 - kAdamBeta2) * g * g;
        p->m[i] = static_cast<float>(m);
        p->v[i] = static_cast<float>(v);
        p->master[i] =
            static_cast<float>(p->master[i] - lr * (m / c1) / (std::sqrt(v / c2) + kAdamEps));
      }
    }
    from_host(be, p->value.get(), p->master, t);
  }
  be.synchronize();
  r.phase_ms[static_cast<int>(Phase::kOptimizer)] +=
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<float> MlpTrainer::weights() const {
  std::vector<float> out;
  for (const auto& p : params_) out.insert(out.end(), p->master.begin(), p->master.end());
  return out;
}

void MlpTrainer::set_weights(const std::vector<float>& w) {
  size_t total = 0;
  for (const auto& p : params_) total += p->master.size();
  if (w.size() != total) {
    throw Error("MlpTrainer::set_weights: " + std::to_string(w.size()) + " values for " +
                std::to_string(total) + " local weights");
  }
  size_t at = 0;
  for (const auto& p : params_) {
    std::copy(w.begin() + static_cast<std::ptrdiff_t>(at),
              w.begin() + static_cast<std::ptrdiff_t>(at + p->master.size()), p->master.begin());
    at += p->master.size();
    from_host(ctx_.backend(), p->value.get(), p->master, cfg_.dtype);
  }
  ctx_.backend().synchronize();
}

std::vector<TraceSpan> MlpTrainer::trace_pass() {
  Backend& be = ctx_.backend();
  const DType t = cfg_.dtype;
  const MPI_Comm world = ctx_.comms().world();
  std::vector<TraceSpan> timeline;
  append_after(timeline, trace_call(be, world, [&] { forward_student(); }), "up_proj forward");
  pre_host_ = to_host(be, pre_, t, n_pre_);
  {
    std::vector<float> h(pre_host_.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(gelu(pre_host_[i]));
    from_host(be, h_, h, t);
  }
  append_after(
      timeline,
      trace_call(
          be, world,
          [&] { down_->forward(h_, params_[2]->value.get(), params_[3]->value.get(), out_); }),
      "down_proj forward");
  // dy as the last step left it: the trace shows the calls, not a new gradient.
  append_after(timeline,
               trace_call(be, world,
                          [&] {
                            down_->backward(h_, params_[2]->value.get(), dy_, dh_,
                                            params_[2]->grad.get(), params_[3]->grad.get());
                          }),
               "down_proj backward");
  append_after(timeline,
               trace_call(be, world,
                          [&] {
                            up_->backward(x_, params_[0]->value.get(), dpre_, dx_,
                                          params_[0]->grad.get(), params_[1]->grad.get());
                          }),
               "up_proj backward");
  return timeline;
}

}  // namespace cgemm::launcher
