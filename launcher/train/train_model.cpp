// cgemm-train's model (train_model.hpp): the student and teacher blocks on the layer pair, the
// host's elementwise steps and the optimizers.

#include "train_model.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/watchdog.hpp"
#include "common/trace_writer.hpp"

namespace cgemm::launcher {

namespace {

constexpr uint64_t kTeacherSeed = 1000;   // the teacher's weights: seed + this + k
constexpr uint64_t kInputSeed = 1000000;  // step i's x: seed + this + i
constexpr float kBiasStd = 0.1f;
constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;

size_t bytes_of(int64_t n, DType t) { return static_cast<size_t>(n) * dtype_size(t); }

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
      return "GELU";
    case Phase::kDownForward:
      return "down_proj forward (reduce-scatter GEMM)";
    case Phase::kLoss:
      return "residual + loss (loss all-reduce)";
    case Phase::kDownBackward:
      return "down_proj backward (all-gather dgrad GEMM, wgrad)";
    case Phase::kGeluBackward:
      return "GELU backward";
    case Phase::kUpBackward:
      return "up_proj backward (reduce-scatter dgrad GEMM, wgrad)";
    case Phase::kDpAllReduce:
      return "dp gradient all-reduce (wait for the buckets)";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kGraphStep:
      return "captured step (CUDA graph replay: targets to optimizer) and the loss read";
    case Phase::kCount:
      break;
  }
  return "?";
}

/// A weight or bias: its value in dtype (what the GEMMs read) and its gradient, both in backend
/// memory; for the student also the fp32 master copy, Adam's moments and (dp > 1) the
/// dp-summed gradient in fp32, in backend memory too.
struct MlpTrainer::Param {
  using Memory = std::unique_ptr<detail::BackendMemory>;
  std::string name;
  int64_t n = 0;        // local elements
  int fsdp_shards = 1;  // the fsdp ranks it is split over (W1 and W2 with --fsdp); 1: whole
  int dp_slot = -1;     // its slot in the dp gradient buckets (student, dp > 1, fsdp 1)
  detail::BackendMemory value, grad;
  Memory master, m, v, summed;  // null where not needed
  Param(Backend& be, std::string nm, const Shape& local, DType t, bool student, bool adam,
        bool dp_sum)
      : name(std::move(nm)),
        n(num_elements(local)),
        value(be, bytes_of(n, t)),
        grad(be, bytes_of(n, t)),
        master(fp32_if(be, student)),
        m(fp32_if(be, student && adam)),
        v(fp32_if(be, student && adam)),
        summed(fp32_if(be, student && dp_sum)) {}
  Memory fp32_if(Backend& be, bool on) const {
    return on ? std::make_unique<detail::BackendMemory>(be, bytes_of(n, DType::kFloat32)) : nullptr;
  }
  static void* get(const Memory& b) { return b ? b->get() : nullptr; }
  // On stream 0, after the buckets' finish(): device to device on the CUDA backend.
  void summed_from_bucket(Backend& be, const float* sum) const {
    be.copy(summed->get(), sum, bytes_of(n, DType::kFloat32), 0, "dp-summed gradient");
  }
};

MlpTrainer::MlpTrainer(Context& ctx, const TrainConfig& cfg)
    : ctx_(ctx), cfg_(cfg), ops_(TrainOps::for_backend(ctx.backend())) {
  TpLinearDesc d;
  d.batch = cfg.batch;
  d.seq_len = cfg.seq_len;
  d.dtype = cfg.dtype;
  d.bias = cfg.bias;
  d.path = cfg.path;
  d.quantization = cfg.quantization;
  d.grad_format = cfg.grad_format;
  d.name = "up_proj";
  d.hidden_in = cfg.hidden;
  d.hidden_out = cfg.ffn;
  up_ = std::make_unique<ColumnParallelLinear>(ctx, d);
  d.name = "down_proj";
  d.hidden_in = cfg.ffn;
  d.hidden_out = cfg.hidden;
  down_ = std::make_unique<RowParallelLinear>(ctx, d);
  if (fp8()) {
    // The teacher's targets stay in dtype, so FP8 and dtype runs train towards the same ones.
    d.quantization = QuantizationDesc{};
    teacher_down_ = std::make_unique<RowParallelLinear>(ctx, d);
    d.name = "up_proj";
    d.hidden_in = cfg.hidden;
    d.hidden_out = cfg.ffn;
    teacher_up_ = std::make_unique<ColumnParallelLinear>(ctx, d);
  }

  Backend& be = ctx.backend();
  const GemmPlan& upf = up_->forward_plan();
  const GemmPlan& downf = down_->forward_plan();
  if (upf.lhs_local() != downf.out_local() || upf.lhs_offset() != downf.out_offset()) {
    throw Error("cgemm-train: the block's input and output shards differ (" +
                shape_str(upf.lhs_local()) + " against " + shape_str(downf.out_local()) + ")");
  }
  n_x_ = num_elements(upf.lhs_local());
  n_pre_ = num_elements(upf.out_local());
  const auto buffer = [&](int64_t n, DType t) {
    buffers_.push_back(std::make_unique<detail::BackendMemory>(be, bytes_of(n, t)));
    return buffers_.back()->get();
  };
  x_ = buffer(n_x_, cfg.dtype);
  out_ = buffer(n_x_, cfg.dtype);
  dy_ = buffer(n_x_, cfg.dtype);
  dx_ = buffer(n_x_, cfg.dtype);
  target_ = static_cast<float*>(buffer(n_x_, DType::kFloat32));
  pre_ = buffer(n_pre_, cfg.dtype);
  h_ = buffer(n_pre_, cfg.dtype);
  dh_ = buffer(n_pre_, cfg.dtype);
  dpre_ = buffer(n_pre_, cfg.dtype);

  // W1, b1, W2, b2: their global shapes and this rank's shards, from the layers (the weights)
  // and the forward plans (the biases).
  struct Spec {
    const char* name;
    const GemmPlan* plan;
    bool bias;
    float std;
    Param** student;
    Param** teacher;
    Shape weight_global;
    const Shape* weight_local;
    const Shape* weight_offset;
  };
  const Spec specs[] = {
      {"W1", &upf, false, static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.hidden))),
       &w1_, &tw1_, Shape{cfg.hidden, cfg.ffn}, &up_->weight_local(), &up_->weight_offset()},
      {"b1", &upf, true, kBiasStd, &b1_, &tb1_, {}, nullptr, nullptr},
      {"W2", &downf, false, static_cast<float>(1.0 / std::sqrt(static_cast<double>(cfg.ffn))), &w2_,
       &tw2_, Shape{cfg.ffn, cfg.hidden}, &down_->weight_local(), &down_->weight_offset()},
      {"b2", &downf, true, kBiasStd, &b2_, &tb2_, {}, nullptr, nullptr}};
  const bool adam = cfg.optimizer == Optimizer::kAdam;
  // With an fsdp axis the layers' gradient GEMMs sum over dp themselves (HSDP: the wgrad's
  // reduce-scatter over fsdp, then an all-reduce over dp; the bias gradients all-reduced).
  const bool dp_sum = ctx.comms().dp() > 1 && ctx.comms().fsdp() == 1;
  uint64_t k = 0;
  for (const Spec& s : specs) {
    ++k;  // the seeds stay those of the four tensors whether the biases are on or not
    if (s.bias && !cfg.bias) continue;
    const GemmDesc& gd = s.plan->desc();
    const Shape& global = s.bias ? *gd.bias_shape : s.weight_global;
    const Shape& local = s.bias ? s.plan->bias_local() : *s.weight_local;
    const Shape offset = s.bias ? s.plan->bias_offset() : *s.weight_offset;
    // The student: fp32 master weights drawn by global index, then rounded to dtype.
    auto p = std::make_unique<Param>(be, s.name, local, cfg.dtype, true, adam, dp_sum);
    if (!s.bias && s.plan->description().fsdp_dim >= 0) p->fsdp_shards = ctx.comms().fsdp();
    be.fill_normal(p->master->get(), DType::kFloat32, global, local, offset, cfg.seed + k, s.std);
    from_host(be, p->value.get(), to_host(be, p->master->get(), DType::kFloat32, p->n), cfg.dtype);
    if (adam) {
      const std::vector<float> zeros(static_cast<size_t>(p->n), 0.0f);
      from_host(be, p->m->get(), zeros, DType::kFloat32);
      from_host(be, p->v->get(), zeros, DType::kFloat32);
    }
    *s.student = p.get();
    params_.push_back(std::move(p));
    // The teacher: drawn in dtype, never updated.
    auto t = std::make_unique<Param>(be, std::string("teacher ") + s.name, local, cfg.dtype, false,
                                     false, false);
    be.fill_normal(t->value.get(), cfg.dtype, global, local, offset, cfg.seed + kTeacherSeed + k,
                   s.std);
    *s.teacher = t.get();
    teacher_.push_back(std::move(t));
  }
  // The dp buckets: slots in the order the backward makes the gradients ready (down_proj's
  // W2 and b2, then up_proj's W1 and b1), as DDP orders them.
  if (dp_sum) {
    std::vector<GradientSlot> slots;
    for (Param* p : {w2_, b2_, w1_, b1_}) {
      if (p == nullptr) continue;
      p->dp_slot = static_cast<int>(slots.size());
      slots.push_back({p->name, p->n});
    }
    buckets_ = std::make_unique<GradientBuckets>(be, std::move(slots),
                                                 static_cast<size_t>(cfg.bucket_kib) * 1024);
  }
  be.synchronize();
}

MlpTrainer::~MlpTrainer() {
  // The graphs name this trainer's buffers (and, on the CPU backend, the trainer itself).
  for (int64_t g : {step_graph_, pass_graph_}) {
    if (g >= 0) ctx_.backend().release_graph(g);
  }
}

int64_t MlpTrainer::bytes_needed(const Context& ctx, const TrainConfig& cfg) {
  const std::string what = "the MLP block's bytes";
  const PlanningMesh m = planning_mesh(ctx);
  const PlanningOptions o = planning_options(ctx);
  const auto es = static_cast<int64_t>(dtype_size(cfg.dtype));
  const bool adam = cfg.optimizer == Optimizer::kAdam, dp_sum = m.dp > 1 && m.fsdp == 1;
  // Per element of a parameter: the student's value and gradient in dtype, its fp32 master,
  // Adam's two fp32 moments, the dp sum and its bucket (fp32); the teacher's value and gradient.
  const int64_t per_param = 2 * es + 4 + (adam ? 8 : 0) + (dp_sum ? 8 : 0) + 2 * es;
  int64_t total = 0;
  const auto add = [&](int64_t count, int64_t each) {
    total = checked_add(total, checked_mul(count, each, what), what);
  };
  int64_t n_x = 0, n_pre = 0, fsdp_ring = 0, fsdp_reorder = 0;
  for (const bool up : {true, false}) {
    TpLinearDesc d;
    d.name = up ? "up_proj" : "down_proj";
    d.batch = cfg.batch;
    d.seq_len = cfg.seq_len;
    d.hidden_in = up ? cfg.hidden : cfg.ffn;
    d.hidden_out = up ? cfg.ffn : cfg.hidden;
    d.dtype = cfg.dtype;
    d.bias = cfg.bias;
    d.quantization = cfg.quantization;
    d.grad_format = cfg.grad_format;
    const PlanDescription p = plan_gemm(
        tp_linear_forward_desc(m, d, up ? CollectiveOp::kAllGather : CollectiveOp::kReduceScatter),
        m, o);
    // Each plan's own workspaces; the fsdp ring, which the plans share, once below.
    add(p.bytes.total() - p.bytes.operands() - p.bytes.fsdp_ring, 3);
    add(num_elements(p.rhs_local), per_param);
    if (cfg.bias) add(num_elements(p.bias_local), per_param);
    // fsdp: the ring (the forward's gathered weight, the dgrad's again, the wgrad's blocks: one
    // weight) and the reorder buffer of a column gather, the context's, at their largest.
    if (p.fsdp_dim >= 0) {
      const int64_t whole = checked_mul(num_elements(p.rhs_gathered), es, what);
      fsdp_ring = std::max({fsdp_ring, whole, p.bytes.fsdp_ring});
      if (p.fsdp_dim == 1) fsdp_reorder = std::max(fsdp_reorder, whole);
      add(whole / m.fsdp, m.fsdp - 1);  // the wgrad's send slots (f - 1 blocks of dW)
    }
    // The all-gathered activation each layer keeps for its wgrad (x for up, dy for down).
    const int64_t gathered = checked_mul(num_elements(up ? p.lhs_local : p.out_local), m.tp, what);
    add(gathered, es);
    if (cfg.quantization.mode != ScalingMode::kNoScaling) {
      // FP8: the weight cache's two copies, x's and dy's copies (up to three FP8 bytes an
      // element of the layer's input and output shards), the gathered activation transposed,
      // and the teacher's layer in dtype (its own gathered activation and plans' workspaces).
      add(num_elements(p.rhs_local), 2);
      add(num_elements(p.lhs_local) + num_elements(p.out_local), 3);
      add(gathered, 1 + es);
      add(p.bytes.total() - p.bytes.operands() - p.bytes.fsdp_ring, 3);
    }
    if (up) {
      n_x = num_elements(p.lhs_local);
      n_pre = num_elements(p.out_local);
    }
  }
  add(fsdp_ring, 1);
  add(fsdp_reorder, 1);
  // x, out, dy, dx in dtype, the fp32 target; pre, h, dh, dpre in dtype.
  add(n_x, 4 * es + 4);
  add(n_pre, 4 * es);
  return total;
}

const void* MlpTrainer::value_of(const Param* p) { return p ? p->value.get() : nullptr; }
void* MlpTrainer::grad_of(const Param* p) { return p ? p->grad.get() : nullptr; }

void MlpTrainer::forward_student() { up_->forward(x_, value_of(w1_), value_of(b1_), pre_); }

StepResult MlpTrainer::step(int step) {
  StepResult r = gradients(step);
  update(r);
  return r;
}

void MlpTrainer::lap(StepResult* r, Clock::time_point* mark, Phase p) {
  if (r == nullptr) return;
  ctx_.backend().synchronize();
  const auto now = Clock::now();
  r->phase_ms[static_cast<int>(p)] +=
      std::chrono::duration<double, std::milli>(now - *mark).count();
  *mark = now;
}

StepResult MlpTrainer::gradients(int step) {
  StepResult r;
  auto mark = Clock::now();
  draw_inputs(step);
  lap(&r, &mark, Phase::kInputs);
  teacher_targets();
  lap(&r, &mark, Phase::kTargets);
  forward_backward(step, &r, &mark);
  finish_dp_sum();
  lap(&r, &mark, Phase::kDpAllReduce);
  return r;
}

void MlpTrainer::draw_inputs(int step) {
  // x ~ N(0, 1), a fresh global batch per step.
  // With an fsdp axis the layers plan on one replica (tp_linear.hpp): the global x has the
  // whole batch, and the layer places the replica's block in it.
  const GemmPlan& upf = up_->forward_plan();
  Shape global = upf.desc().lhs_shape;
  global[0] = cfg_.batch;  // batch-first
  const Shape offset = up_->activation_offset(upf.lhs_offset());
  ctx_.backend().fill_normal(x_, cfg_.dtype, global, upf.lhs_local(), offset,
                             cfg_.seed + kInputSeed + static_cast<uint64_t>(step), 1.0f);
}

void MlpTrainer::teacher_targets() {
  // The teacher's block on the same x (the residual included), kept in fp32; in dtype also when
  // the student trains in FP8.
  (teacher_up_ ? *teacher_up_ : *up_).forward(x_, value_of(tw1_), value_of(tb1_), pre_);
  ops_->gelu(pre_, h_, cfg_.dtype, n_pre_);
  (teacher_down_ ? *teacher_down_ : *down_).forward(h_, value_of(tw2_), value_of(tb2_), out_);
  ops_->add_to_f32(out_, x_, cfg_.dtype, target_, n_x_);
}

void MlpTrainer::finish_dp_sum() {
  // The data-parallel sum: the buckets started in forward_backward() as the gradients became
  // ready; order stream 0 after them and copy the sums where the optimizer reads them.
  summed_ = buckets_ != nullptr;
  if (!summed_) return;
  buckets_->finish();
  for (const auto& p : params_) p->summed_from_bucket(ctx_.backend(), buckets_->summed(p->dp_slot));
}

double MlpTrainer::loss_count() const {
  // loss = sum (y - target)^2 / count over the job, count the global elements.
  return static_cast<double>(cfg_.batch) * static_cast<double>(cfg_.seq_len) *
         static_cast<double>(cfg_.hidden);
}

double MlpTrainer::job_loss(int step, bool timed) {
  double sum = ops_->loss_sum();
  const watchdog::WaitScope wait(!timed
                                     ? "the other ranks' loss of step " + std::to_string(step + 1)
                                     : std::string("the other ranks' loss of a timed "
                                                   "or traced pass"));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, ctx_.comms().world()),
            "MPI_Allreduce(loss)");
  return sum / loss_count();
}

void MlpTrainer::forward_backward(int step, StepResult* r, Clock::time_point* mark) {
  const DType t = cfg_.dtype;
  forward_student();
  lap(r, mark, Phase::kUpForward);
  ops_->gelu(pre_, h_, t, n_pre_);
  lap(r, mark, Phase::kGelu);
  down_->forward(h_, value_of(w2_), value_of(b2_), out_);
  lap(r, mark, Phase::kDownForward);

  // dL/dy = 2 (y - target) / count; the loss's sums stay on the device until job_loss() reads
  // them (not inside a graph: its replays read them after).
  ops_->squared_error_issue(out_, x_, target_, dy_, t, n_x_, 2.0 / loss_count());
  if (!graph_issue_) {
    const double loss = job_loss(step, r == nullptr);
    if (r != nullptr) r->loss = loss;
  }
  lap(r, mark, Phase::kLoss);

  // backward (x is not trained: dx is computed, as a layer inside a network must, and left).
  // A training step's gradients go to the dp buckets (a timed pass's do not: r is null).
  const bool dp = r != nullptr || (graph_issue_ && step >= 0);
  down_->backward(h_, value_of(w2_), dy_, dh_, grad_of(w2_), grad_of(b2_));
  if (dp) start_dp_sum({w2_, b2_});
  lap(r, mark, Phase::kDownBackward);
  ops_->gelu_backward(dh_, pre_, dpre_, t, n_pre_);
  lap(r, mark, Phase::kGeluBackward);
  up_->backward(x_, value_of(w1_), dpre_, dx_, grad_of(w1_), grad_of(b1_));
  if (dp) start_dp_sum({w1_, b1_});
  lap(r, mark, Phase::kUpBackward);
}

void MlpTrainer::start_dp_sum(std::initializer_list<Param*> ready) {
  if (buckets_ == nullptr) return;
  for (Param* p : ready) {
    if (p != nullptr) buckets_->ready(p->dp_slot, p->grad.get(), cfg_.dtype);
  }
}

void MlpTrainer::update(StepResult& r) {
  const auto start = Clock::now();
  ++adam_t_;
  issue_optimizer();
  ctx_.backend().synchronize();
  r.phase_ms[static_cast<int>(Phase::kOptimizer)] +=
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void MlpTrainer::issue_optimizer() {
  // optimizer: on the fp32 master weights, then rounded to dtype for the next step.
  for (const auto& p : params_) {
    OptimizerStep s;
    s.kind =
        cfg_.optimizer == Optimizer::kSgd ? OptimizerStep::Kind::kSgd : OptimizerStep::Kind::kAdam;
    s.master = static_cast<float*>(Param::get(p->master));
    s.m = static_cast<float*>(Param::get(p->m));
    s.v = static_cast<float*>(Param::get(p->v));
    s.grad = summed_ ? Param::get(p->summed) : p->grad.get();
    s.grad_dtype = summed_ ? DType::kFloat32 : cfg_.dtype;
    s.value = p->value.get();
    s.value_dtype = cfg_.dtype;
    s.n = p->n;
    s.lr = cfg_.lr;
    s.beta1 = kAdamBeta1;
    s.beta2 = kAdamBeta2;
    s.eps = kAdamEps;
    s.step = std::max(adam_t_, 1);
    if (graph_issue_ && corrections_ != nullptr) {
      s.bias_corrections = static_cast<const double*>(corrections_->get());
    }
    ops_->optimizer_step(s);
  }
}

int64_t MlpTrainer::capture(const char* what, const std::function<void()>& issue) {
  Backend& be = ctx_.backend();
  if (const std::string why = be.capture_refusal(); !why.empty()) {
    throw Error(std::string("--cuda_graph on: ") + what + " cannot be captured: " + why);
  }
  return be.capture_graph(be.native_stream(), [this, issue] {
    graph_issue_ = true;
    try {
      issue();
    } catch (...) {
      graph_issue_ = false;
      throw;
    }
    graph_issue_ = false;
  });
}

StepResult MlpTrainer::step_graphed(int step) {
  Backend& be = ctx_.backend();
  if (adam_t_ < 1) {
    throw Error(
        "MlpTrainer::step_graphed: run step() once first (the capture needs what the "
        "first step makes)");
  }
  if (step_graph_ < 0) {
    if (cfg_.optimizer == Optimizer::kAdam) {
      corrections_ = std::make_unique<detail::BackendMemory>(be, 2 * sizeof(double));
    }
    step_graph_ = capture("the training step", [this, step] {
      teacher_targets();
      forward_backward(step, nullptr, nullptr);
      finish_dp_sum();
      issue_optimizer();
    });
  }
  StepResult r;
  auto start = Clock::now();
  draw_inputs(step);
  ++adam_t_;
  if (corrections_ != nullptr) {
    // As the optimizer computes them from the step when it is not captured.
    const double c[2] = {1.0 - std::pow(kAdamBeta1, adam_t_), 1.0 - std::pow(kAdamBeta2, adam_t_)};
    be.copy_from_host(corrections_->get(), c, sizeof(c));
  }
  be.synchronize();
  auto now = Clock::now();
  r.phase_ms[static_cast<int>(Phase::kInputs)] =
      std::chrono::duration<double, std::milli>(now - start).count();
  start = now;
  be.replay_graph(step_graph_, be.native_stream());
  r.loss = job_loss(step, false);
  summed_ = buckets_ != nullptr;
  be.synchronize();
  r.phase_ms[static_cast<int>(Phase::kGraphStep)] =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return r;
}

StateBytes MlpTrainer::state_bytes() const {
  StateBytes b;
  for (const auto& p : params_) {
    int64_t each = 2 * static_cast<int64_t>(dtype_size(cfg_.dtype));
    for (const Param::Memory* m : {&p->master, &p->m, &p->v, &p->summed}) {
      if (*m != nullptr) each += 4;
    }
    const int64_t mine = p->n * each;
    if (p.get() == w1_ || p.get() == w2_) {
      b.weights += mine;
      b.weights_replicated += mine * p->fsdp_shards;
    } else {
      b.biases += mine;
    }
  }
  b.gathered = ctx_.fsdp_ring_bytes() + ctx_.fsdp_reorder_bytes();
  if (ctx_.comms().fsdp() > 1) {
    // The wgrads' own send slots (f - 1 blocks of dW each): what a plain wgrad does not hold.
    for (const GemmPlan* p : {&up_->wgrad_plan(), &down_->wgrad_plan()}) {
      const PlanBytes& pb = p->description().bytes;
      b.gathered += pb.workspace - pb.fsdp_ring;
    }
  }
  return b;
}

std::vector<float> MlpTrainer::weights() const {
  std::vector<float> out;
  for (const auto& p : params_) {
    const std::vector<float> w = to_host(ctx_.backend(), p->master->get(), DType::kFloat32, p->n);
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

std::vector<float> MlpTrainer::gradients_host() const {
  std::vector<float> out;
  for (const auto& p : params_) {
    const std::vector<float> g =
        summed_ ? to_host(ctx_.backend(), p->summed->get(), DType::kFloat32, p->n)
                : to_host(ctx_.backend(), p->grad.get(), cfg_.dtype, p->n);
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

void MlpTrainer::set_weights(const std::vector<float>& w) {
  size_t total = 0;
  for (const auto& p : params_) total += static_cast<size_t>(p->n);
  if (w.size() != total) {
    throw Error("MlpTrainer::set_weights: " + std::to_string(w.size()) + " values for " +
                std::to_string(total) + " local weights");
  }
  size_t at = 0;
  for (const auto& p : params_) {
    const std::vector<float> mine(w.begin() + static_cast<std::ptrdiff_t>(at),
                                  w.begin() + static_cast<std::ptrdiff_t>(at + p->n));
    at += static_cast<size_t>(p->n);
    from_host(ctx_.backend(), p->master->get(), mine, DType::kFloat32);
    from_host(ctx_.backend(), p->value.get(), mine, cfg_.dtype);
  }
  ctx_.backend().synchronize();
}

std::vector<TraceSpan> MlpTrainer::trace_pass() {
  Backend& be = ctx_.backend();
  const DType t = cfg_.dtype;
  const MPI_Comm world = ctx_.comms().world();
  std::vector<TraceSpan> timeline;
  append_after(timeline, trace_call(be, world, [&] { forward_student(); }), "up_proj forward");
  ops_->gelu(pre_, h_, t, n_pre_);
  append_after(
      timeline,
      trace_call(be, world, [&] { down_->forward(h_, value_of(w2_), value_of(b2_), out_); }),
      "down_proj forward");
  // dy as the last step left it: the trace shows the calls, not a new gradient.
  append_after(
      timeline,
      trace_call(be, world,
                 [&] { down_->backward(h_, value_of(w2_), dy_, dh_, grad_of(w2_), grad_of(b2_)); }),
      "down_proj backward");
  ops_->gelu_backward(dh_, pre_, dpre_, t, n_pre_);
  append_after(
      timeline,
      trace_call(be, world,
                 [&] { up_->backward(x_, value_of(w1_), dpre_, dx_, grad_of(w1_), grad_of(b1_)); }),
      "up_proj backward");
  return timeline;
}

double MlpTrainer::timed_pass() {
  return ctx_.backend().time_ms([&] { forward_backward(0, nullptr, nullptr); });
}

double MlpTrainer::timed_pass_graphed() {
  // step -1: no dp sum, as the eager timed pass (with --fsdp the gradient GEMMs sum over fsdp
  // and dp themselves, in both).
  if (pass_graph_ < 0) {
    pass_graph_ = capture("the timed pass", [this] { forward_backward(-1, nullptr, nullptr); });
  }
  Backend& be = ctx_.backend();
  return be.time_ms([&] { be.replay_graph(pass_graph_, be.native_stream()); });
}

}  // namespace cgemm::launcher
