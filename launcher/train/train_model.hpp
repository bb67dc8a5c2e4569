#pragma once
// cgemm-train's model: an MLP block with a residual, y = x + GELU(x W1 + b1) W2 + b2, on the
// tensor-parallel layer pair (runtime/include/cgemm/runtime/tp_linear.hpp) with sequence
// parallelism, trained against a teacher block of the same shape (other weights) by SGD or
// Adam.
//
// Shapes (global B, S, H, F; local = this rank's shard):
//   x, y, target  [B, S, H]  local [B/dp, S/tp, H]   (dp, tpsp, None)
//   pre, h        [B, S, F]  local [B/dp, S, F/tp]   pre = AG(x) W1 + b1, h = GELU(pre)
//   W1 [H, F] local [H, F/tp]; b1 [F] local [F/tp]; W2 [F, H] local [F/tp, H]; b2 [H] (whole)
// loss = mean over the B*S*H global elements of (y - target)^2, its sum all-reduced over the
// job; dL/dy = 2 (y - target) / (B*S*H) on each rank's shard.
//
// Every rank fills its shards of the same global tensors (Backend::fill_normal, by global
// index), so any dp x tp mesh trains the same model as one rank, up to the order of sums.
//
// Where the work runs: on the backend, all of it. The GEMMs and their collectives are the
// layers' plans; the elementwise steps (GELU and its derivative, the residual, the loss and its
// gradient, the optimizer on fp32 master weights and Adam moments kept in backend memory) are
// TrainOps (runtime/include/cgemm/runtime/train_ops.hpp): host loops on the CPU backend,
// kernels on stream 0 on the CUDA backend. The only host round trip of a step is the loss (one
// double per rank, summed over the job). With dp > 1 the data-parallel sum of the gradients is
// GradientBuckets (gradient_buckets.hpp): fp32 buckets in backend memory, a bucket's all-reduce
// over the dp group started as soon as its gradients are ready (down_proj's during up_proj's
// backward), joined into stream 0 after the backward pass, the sums copied (device to device on
// the CUDA backend) where the optimizer reads them. The phase times are host clocks around
// synchronized phases: the all-reduces' time lands in the backward phases they overlap (on the
// CPU backend, which runs each as its bucket completes, in the backward phase that completes
// it), and "dp gradient all-reduce" is what is left to wait after the backward.
//
// Errors: the constructor throws PlanError when the planner refuses a shape and cgemm::Error
// for a bad size; step() throws cgemm::Error on a failed MPI call.

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/gradient_buckets.hpp"
#include "cgemm/runtime/tp_linear.hpp"
#include "cgemm/runtime/train_ops.hpp"
#include "train_config.hpp"

namespace cgemm::launcher {

/// The phases of a step, in order; their times in ms.
enum class Phase {
  kInputs,        // x drawn
  kTargets,       // the teacher's forward pass (both GEMMs and its GELU)
  kUpForward,     // up_proj: all-gather GEMM
  kGelu,          // TrainOps
  kDownForward,   // down_proj: reduce-scatter GEMM
  kLoss,          // TrainOps: residual, loss, dL/dy; the loss's all-reduce (MPI)
  kDownBackward,  // down_proj: all-gather dgrad GEMM, wgrad and bias-gradient GEMMs
  kGeluBackward,  // TrainOps
  kUpBackward,    // up_proj: reduce-scatter dgrad GEMM, wgrad and bias-gradient GEMMs
  kDpAllReduce,   // the wait for the dp gradient buckets, the sums back to the backend
  kOptimizer,     // TrainOps: the update of the master weights and their copy in dtype
  kGraphStep,     // --cuda_graph: the replay of the captured step (targets to optimizer) and
                  // the loss read after it; the phases above it then hold only the inputs
  kCount
};
const char* phase_name(Phase p);

using Clock = std::chrono::steady_clock;

/// This rank's bytes for the student's parameters: each weight and bias with its gradient (in
/// dtype), its fp32 master, Adam's two fp32 moments and (dp > 1 without fsdp) its fp32 dp sum.
struct StateBytes {
  int64_t weights = 0;             // W1 and W2's
  int64_t weights_replicated = 0;  // the same with no fsdp axis (each weight whole on a rank)
  int64_t biases = 0;              // b1 and b2's: replicated over fsdp (gemm.py's bias spec
                                   // follows the gathered weight's columns)
  // What FSDP holds besides: the context's fsdp ring (one gathered weight, shared by the
  // plans and the dgrads' gathers), its reorder buffer (the rank-major column shards the
  // dgrads' gathers reorder; one weight too) and each wgrad's send slots (f - 1 blocks of its
  // dW). Not counted: the backend's staging of the fsdp group's collectives (copy engines).
  int64_t gathered = 0;
};

struct StepResult {
  double loss = 0.0;                                      // the job's, the same on every rank
  double phase_ms[static_cast<int>(Phase::kCount)] = {};  // this rank's
};

class MlpTrainer {
 public:
  MlpTrainer(Context& ctx, const TrainConfig& cfg);
  ~MlpTrainer();

  /// The bytes a trainer of `cfg` on `ctx` holds on this rank, planned before anything is
  /// allocated, for the memory check (dry_run.hpp's check_shared_memory): the activations,
  /// the student's and the teacher's weights and gradients, the fp32 master weights, Adam's
  /// moments and the dp buckets as the constructor allocates them, and each layer's three
  /// GEMM plans (forward, dgrad, wgrad) counted at its forward plan's workspaces and scratch
  /// each, plus its gathered activation. Throws the planner's errors (PlanError).
  static int64_t bytes_needed(const Context& ctx, const TrainConfig& cfg);
  MlpTrainer(const MlpTrainer&) = delete;
  MlpTrainer& operator=(const MlpTrainer&) = delete;

  /// One optimizer step (step counts from 0) on the inputs drawn for it. Collective over the
  /// job: every rank calls it with the same step.
  StepResult step(int step);
  /// step()'s first part: the loss and the dp-summed gradients of the current weights on step
  /// `step`'s inputs (kept for update() and gradients_host()); weights unchanged.
  StepResult gradients(int step);
  /// step()'s second part: the optimizer's update from the last gradients() (adds its time).
  void update(StepResult& r);
  /// step() from a CUDA graph (--cuda_graph; docs/CUDA_GRAPHS.md): the inputs drawn and Adam's
  /// bias corrections copied in eagerly, then one replay of the step captured at the first
  /// call (everything step() does after the inputs; the loss and dL/dy on the device), then the
  /// loss read. The same losses, weights and gradients as step(), bit for bit. Call step()
  /// once first: the capture needs what the first step makes (the GEMM algorithms, the
  /// collectives' staging). Throws cgemm::Error, before capturing, when the backend cannot
  /// capture the step (Backend::capture_refusal), naming why.
  StepResult step_graphed(int step);

  /// This rank's shards of W1, b1, W2, b2 (without the biases when cfg.bias is off),
  /// concatenated in that order, row-major: the fp32 master weights and the last gradients()
  /// (summed over dp). Host copies, for tests.
  std::vector<float> weights() const;
  std::vector<float> gradients_host() const;
  /// Replaces the master weights (the same layout as weights()) and the backend's copies.
  void set_weights(const std::vector<float>& w);

  /// One more forward and backward pass of the student on the last step's inputs (no update),
  /// each layer call traced (trace_writer.hpp) and laid one after another: this rank's spans.
  std::vector<TraceSpan> trace_pass();
  /// One forward and backward pass of the student on the last step's inputs (no update: the
  /// loss, dL/dy and the gradients are recomputed, the weights stay), timed by the backend
  /// (Backend::time_ms: CUDA events on a GPU) in ms. What the PyTorch peer times.
  double timed_pass();
  /// The same pass captured once (the loss left on the device, not read) and replayed.
  double timed_pass_graphed();

  const ColumnParallelLinear& up() const { return *up_; }
  StateBytes state_bytes() const;
  /// The dp gradient buckets; null with dp 1.
  const GradientBuckets* dp_buckets() const { return buckets_.get(); }
  const RowParallelLinear& down() const { return *down_; }

 private:
  struct Param;
  static const void* value_of(const Param* p);  // null for an absent bias
  static void* grad_of(const Param* p);
  void forward_student();  // up_proj's forward on x
  /// The student's forward pass, its loss and its backward pass on the current x and target;
  /// with r, each phase is timed into it (a synchronize per phase) and the loss stored, and the
  /// gradients go to the dp buckets. While graph_issue_, the loss stays on the device.
  void forward_backward(int step, StepResult* r, Clock::time_point* mark);
  void draw_inputs(int step);
  void teacher_targets();
  /// The dp buckets joined and their sums copied where the optimizer reads them (dp > 1).
  void finish_dp_sum();
  /// The optimizer's update of every parameter from the last gradients, at Adam step adam_t_
  /// (read from corrections_ while graph_issue_).
  void issue_optimizer();
  /// The job's loss of the last squared error: its partial sums read (a host wait), summed
  /// over the job (MPI), divided by the global count.
  double job_loss(int step, bool timed);
  /// The global elements the loss is the mean over (B S H).
  double loss_count() const;
  /// Captures `issue` (with graph_issue_ set) into a graph of the backend, after checking that
  /// the backend can; `what` names it in the refusal.
  int64_t capture(const char* what, const std::function<void()>& issue);
  void lap(StepResult* r, Clock::time_point* mark, Phase p);
  /// Hands the gradients of `ready` (null: an absent bias) to the dp buckets, which start a
  /// bucket's all-reduce when its last gradient is in (dp > 1; nothing otherwise).
  void start_dp_sum(std::initializer_list<Param*> ready);

  Context& ctx_;
  const TrainConfig cfg_;
  std::unique_ptr<TrainOps> ops_;
  std::unique_ptr<ColumnParallelLinear> up_;
  std::unique_ptr<RowParallelLinear> down_;
  // FP8 (--scaling): the teacher's layers in dtype (the student's run in FP8).
  std::unique_ptr<ColumnParallelLinear> teacher_up_;
  std::unique_ptr<RowParallelLinear> teacher_down_;
  bool fp8() const { return cfg_.quantization.mode != ScalingMode::kNoScaling; }
  // W1, b1, W2, b2 (the biases null without cfg.bias); params_ holds the student's in that
  // order, the teacher's are fixed.
  std::vector<std::unique_ptr<Param>> params_, teacher_;
  Param *w1_ = nullptr, *b1_ = nullptr, *w2_ = nullptr, *b2_ = nullptr;
  Param *tw1_ = nullptr, *tb1_ = nullptr, *tw2_ = nullptr, *tb2_ = nullptr;
  std::vector<std::unique_ptr<detail::BackendMemory>> buffers_;
  void *x_, *pre_, *h_, *out_, *dy_, *dh_, *dpre_, *dx_;
  float* target_;                             // fp32 [local x]: the teacher's block output
  int64_t n_x_ = 0, n_pre_ = 0;               // local elements of x (= y) and of pre (= h)
  std::unique_ptr<GradientBuckets> buckets_;  // dp > 1 only
  bool summed_ = false;  // the last gradients() were summed over dp (Param::summed)
  int adam_t_ = 0;
  // --cuda_graph: the captured step and pass (-1: not yet), Adam's bias corrections for the
  // step being replayed (two doubles of backend memory), and whether the work being issued
  // is a graph's (the loss is then not read, Adam reads corrections_).
  int64_t step_graph_ = -1, pass_graph_ = -1;
  std::unique_ptr<detail::BackendMemory> corrections_;
  bool graph_issue_ = false;
};

}  // namespace cgemm::launcher
