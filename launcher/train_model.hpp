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
// Where the work runs: the GEMMs and their collectives on the backend (the layers' plans); the
// elementwise steps (GELU and its derivative, the residual, the loss and its gradient, the
// optimizer) on host copies made with Backend::copy_to_host / copy_from_host; the data-parallel
// sum of the gradients with MPI_Allreduce over the dp communicator after the backward pass,
// in fp32. Both are the first version: the backend has no elementwise kernels (so there is no
// GPU path yet), and a bucketed all-reduce overlapped with the backward is still to come.
//
// Errors: the constructor throws PlanError when the planner refuses a shape and cgemm::Error
// for a bad size; step() throws cgemm::Error on a failed MPI call.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/tp_linear.hpp"
#include "train_config.hpp"

namespace cgemm::launcher {

/// The phases of a step, in order; their times in ms.
enum class Phase {
  kInputs,        // x drawn
  kTargets,       // the teacher's forward pass (both GEMMs and the host's GELU)
  kUpForward,     // up_proj: all-gather GEMM
  kGelu,          // host
  kDownForward,   // down_proj: reduce-scatter GEMM
  kLoss,          // host: residual, loss, dL/dy; the loss's all-reduce
  kDownBackward,  // down_proj: all-gather dgrad GEMM, wgrad and bias-gradient GEMMs
  kGeluBackward,  // host
  kUpBackward,    // up_proj: reduce-scatter dgrad GEMM, wgrad and bias-gradient GEMMs
  kDpAllReduce,   // MPI_Allreduce of the gradients over dp
  kOptimizer,     // host: the update and the copy of the new weights to the backend
  kCount
};
const char* phase_name(Phase p);

struct StepResult {
  double loss = 0.0;                                      // the job's, the same on every rank
  double phase_ms[static_cast<int>(Phase::kCount)] = {};  // this rank's
};

class MlpTrainer {
 public:
  MlpTrainer(Context& ctx, const TrainConfig& cfg);
  ~MlpTrainer();
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

  /// This rank's shards of W1, b1, W2, b2, concatenated in that order, row-major: the fp32
  /// master weights and the last gradients() (summed over dp). For tests.
  std::vector<float> weights() const;
  const std::vector<float>& gradients_host() const { return grads_; }
  /// Replaces the master weights (the same layout as weights()) and the backend's copies.
  void set_weights(const std::vector<float>& w);

  /// One more forward and backward pass of the student on the last step's inputs (no update),
  /// each layer call traced (trace_writer.hpp) and laid one after another: this rank's spans.
  std::vector<TraceSpan> trace_pass();

  const ColumnParallelLinear& up() const { return *up_; }
  const RowParallelLinear& down() const { return *down_; }

 private:
  struct Param;
  void forward_student();

  Context& ctx_;
  const TrainConfig cfg_;
  std::unique_ptr<ColumnParallelLinear> up_;
  std::unique_ptr<RowParallelLinear> down_;
  std::vector<std::unique_ptr<Param>> params_;   // W1, b1, W2, b2
  std::vector<std::unique_ptr<Param>> teacher_;  // the same four, fixed
  std::vector<std::unique_ptr<detail::BackendMemory>> buffers_;
  void *x_, *pre_, *h_, *out_, *dy_, *dh_, *dpre_, *dx_;
  int64_t n_x_ = 0, n_pre_ = 0;  // local elements of x (= y) and of pre (= h)
  std::vector<float> x_host_, pre_host_, target_host_;
  std::vector<float> grads_;  // the last gradients(), summed over dp
  int adam_t_ = 0;
};

}  // namespace cgemm::launcher
