#pragma once
// The tensor-parallel linear layer pair with sequence parallelism, as Megatron-LM and
// Transformer Engine lay it out (an MLP: column-parallel up-projection, an elementwise
// function, row-parallel down-projection). Each layer owns its forward, dgrad and wgrad GEMMs
// as GemmPlans built through the planner (plan.hpp), so every GEMM is checked against
// gemm.py's rules and runs on either backend, overlapped or sequential.
//
// Collectives: each layer's forward and backward (dgrad) collectives are
// CollectiveOpSet::create(forward) (core/collective_op.hpp, gemm.py's CollectiveOpSet):
//   column-parallel: forward all-gather, dgrad reduce-scatter;
//   row-parallel:    forward reduce-scatter, dgrad all-gather.
// The weight gradients are plain GEMMs (collective none) on the gathered activations.
//
// Notation. Global shapes in elements, outermost first; B the global batch, S the sequence,
// K = hidden_in, N = hidden_out, tp the TP group size, dp the data-parallel size. With
// transpose_batch_sequence every activation is [S, B, .] and the first two entries of its
// spec swap. "Local" is this rank's shard, what the caller's buffers hold (backend memory,
// row-major, in TpLinearDesc::dtype); each plan's lhs_offset()/out_offset() etc. place a shard
// in its global tensor (an activation's through activation_offset(), which adds the replica's
// batch block where the mesh has an fsdp axis: see FSDP below).
//
// Column-parallel (forward all-gather):
//   x  [B, S, K] (dp, tpsp, None)   local [B/dp, S/tp, K]   sequence-parallel input
//   W  [K, N]    (None, tpsp)       local [K, N/tp]
//   b  [N]       (tpsp)             local [N/tp]
//   y  [B, S, N] (dp, None, tpsp)   local [B/dp, S, N/tp]   y = AG(x) W + b
//   dgrad: dx = RS(dy W^T), a reduce-scatter GEMM, dy (dp, None, tpsp) times W as rhs [K, N]
//          contracting its dim 1 (None, tpsp); dx like x.
//   wgrad: dW = AG(x)^T dy, a plain GEMM contracting the batch and sequence dims of both
//          (local [K, N/tp]); db = the sum of dy over the local tokens (local [N/tp]).
//   AG(x), by WgradInput: kKeepFromForward takes it from the forward all-gather GEMM, which
//   hands out the x its ring gathers (GemmPlan's Operand::kGatheredLhs: no second all-gather),
//   and keeps it in the layer until backward() (one forward per backward: a second forward
//   replaces the kept x, and backward() consumes it); kGatherAgain gathers x again in
//   backward() with an ActivationGather (activation_gather.hpp) before the wgrad (TE's bulk
//   all-gather, which TE overlaps with the dgrad GEMM; here it is ordered before it, since the
//   wgrad reads dy before the dgrad writes dx, which may lie over dy).
//   Memory: the layer holds AG(x) [B/dp, S, K] for its lifetime in both modes; with
//   kGatherAgain its ActivationGather a second one for batch-first shards with a local batch
//   > 1 (its rank-major buffer); the forward plan's sequential path has its own gathered
//   workspace as before.
// Row-parallel (forward reduce-scatter):
//   h  [B, S, K] (dp, None, tpsp)   local [B/dp, S, K/tp]   a column-parallel layer's output
//   W  [K, N]    (tpsp, None)       local [K/tp, N]
//   b  [N]       (None)             local [N]               replicated
//   y  [B, S, N] (dp, tpsp, None)   local [B/dp, S/tp, N]   y = RS(h W) + b
//   dgrad: dh = AG(dy) W^T, an all-gather GEMM, dy (dp, tpsp, None) times W as rhs [K, N]
//          contracting its dim 1 (tpsp, None); dh like h.
//   wgrad: dW = h^T AG(dy) (local [K/tp, N]); db = the sum of AG(dy) over all local tokens
//          ([N]: the bias is replicated, so its gradient is the whole sequence's, which no
//          rank holds before the gather; each rank sums the same gathered tensor in the same
//          order, so every TP rank gets the same bits).
//   AG(dy) is the dgrad all-gather GEMM's gathered lhs, which it hands out into the layer's
//   buffer (GemmPlan's Operand::kGatheredLhs, as TE's row-parallel backward reuses the dy its
//   dgrad gathered): one all-gather of dy per backward. So the dgrad runs first, then the wgrad
//   and the bias gradient. Memory: the layer holds AG(dy) [B/dp, S, N] for its lifetime.
// Data parallelism (no fsdp axis): the weight and bias gradients are this dp rank's (its local
// batch's); summing them over dp (the data-parallel all-reduce) is the caller's. The wgrad plans
// see the local batch as their whole batch (batch dims unsharded), which is why they plan on a dp x
// tp mesh without a dp reduction.
//
// FSDP (a mesh with an fsdp axis, docs/FSDP.md): the batch is
// sharded over ('dp', 'fsdp') (fsdp alone at dp 1) and each weight over fsdp as
// tensor_sequence_parallel_gemm lays it out: the column layer's W ('fsdp', 'tpsp') ((None, 'fsdp')
// at tp 1), the row layer's ('tpsp', 'fsdp'); the caller passes its shard of W
// (forward_plan().rhs_local()) and gets its shard of dW. The forward gathers W inside its GEMM;
// backward() gathers it again over fsdp before the dgrad (not hidden); the wgrad reduce-scatters dW
// over fsdp (then all-reduces it over dp) inside its plan; db is all-reduced over fsdp and dp (the
// biases are replicated, as gemm.py's bias spec follows the gathered weight's columns). So the dp
// sum is done, not the caller's. The forward and dgrad plans are one replica's: batch B/dp over
// 'fsdp' (their offsets are within the replica; its batch block is dp_rank's); the gradient plans
// see the global batch.
//
// Bias gradients are GEMMs too (planned as the wgrad, so they run on either
// backend with no kernel of their own): a ones tensor [B/dp, S] (or [S, B/dp]) contracted with dy's
// (the column layer's local dy, the row layer's AG(dy)) batch and sequence dims.
//
// Every call is collective over the TP group (the GEMMs' collectives), with an fsdp axis over the
// fsdp and dp groups too, and so is making a layer (its plans allocate their rings): every rank
// calls the same methods in the same order. Calls are
// on the backend's stream 0, asynchronous on CUDA (as GemmPlan::execute). A layer is not safe for
// concurrent calls (it holds the kept activation and the plans' buffers); the Context must
// outlive it. Buffers: outputs must not overlap inputs. The order of the backward GEMMs:
//   column-parallel: wgrad, bias gradient, then the dgrad (the wgrad and db read dy first);
//   row-parallel:    dgrad (which gathers dy), then the wgrad and the bias gradient, which
//                    read h and AG(dy) after dh is written: dh over h, which an earlier
//                    version allowed, is refused (cgemm::Error) rather than giving a wrong dW.
//                    FP8 allows it: its wgrad reads h's copy, made by the forward.
// FP8 (TpLinearDesc::quantization, as Transformer Engine's Linear under fp8_autocast with its
// default HYBRID recipe): every GEMM of forward and backward runs in FP8, per-tensor scaled
// (current or delayed scaling, one scale per global tensor): the forward e4m3 x e4m3, the dgrad
// and wgrad with dy in grad_format (e5m2, or e4m3). The weight is read from a QuantizedTensor
// (quantized_tensor.hpp) with both copies: the caller's cache, quantized once per optimizer step
// (the forward and backward overloads taking one; weight_cache_desc() describes it), or the
// layer's own, quantized from W on every forward() (the pointer overloads; backward() reuses
// it). The all-gathers move FP8 bytes: the column layer's x and the row layer's dy are quantized
// once per call and handed out gathered for the wgrad, which reads them transposed. The row
// layer's h is quantized once by forward() into both copies; its wgrad reads the colwise one, so
// its FP8 backward() must follow the forward() of the same h (cgemm::Error otherwise). The bias
// gradients stay in `dtype`; the row layer's sums its own tokens and all-reduces over tp.
// weight_local() / weight_offset() are the W shard the caller holds ([K_l, N_l], in `dtype`):
// the forward plan's rhs is the colwise copy [N_l, K_l]. Not with an fsdp axis, nor with
// WgradInput::kGatherAgain (cgemm::Error).
//
// Errors: the constructor throws cgemm::Error when a dim does not divide over its mesh axis
// (S by tp; N by tp for the column layer, K by tp for the row layer; B by dp, by dp x fsdp with
// an fsdp axis, and the fsdp-sharded weight dim by fsdp: cgemm does not pad shards) or for a bad
// dtype or size, and PlanError (a cgemm::Error) for gemm.py's own rules (its reorder and chunk
// checks); forward() and backward() throw cgemm::Error naming the layer and the buffer when a
// buffer they read or write is null (db: only when the layer has a bias), the column layer's
// backward() with kKeepFromForward when no forward() ran since the last backward(), and the
// row layer's backward() when dh overlaps h (not in FP8) or, in FP8, when it follows no
// forward() of that h.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cgemm/core/collective_op.hpp"
#include "cgemm/runtime/activation_gather.hpp"
#include "cgemm/runtime/plan.hpp"
#include "cgemm/runtime/quantized_tensor.hpp"

namespace cgemm {

class FsdpWeightGather;  // runtime/src/layers: the weight gathered again for the dgrad (fsdp > 1)

namespace detail {

/// Backend memory released with its owner (a layer's gathered activation and its ones), so a
/// constructor that throws half-way leaks nothing.
class BackendMemory {
 public:
  BackendMemory() = default;
  BackendMemory(Backend& be, size_t bytes) : be_(&be), p_(be.allocate(bytes)) {}
  ~BackendMemory() {
    if (p_ != nullptr) be_->release(p_);
  }
  BackendMemory(const BackendMemory&) = delete;
  BackendMemory& operator=(const BackendMemory&) = delete;
  void* get() const { return p_; }

 private:
  Backend* be_ = nullptr;
  void* p_ = nullptr;
};
}  // namespace detail

struct TpLinearDesc;

/// Which path each GEMM of a layer runs (GemmPlan's three entry points).
enum class LinearPath {
  kPolicy,      // GemmPlan::execute: the context's overlap policy
  kOverlapped,  // GemmPlan::execute_overlapped
  kSequential,  // GemmPlan::execute_sequential: collective, then GEMM (or the reverse)
};

/// Where the column-parallel wgrad finds AG(x).
enum class WgradInput {
  kKeepFromForward,  // gathered in forward() into the layer's buffer, read in backward()
  kGatherAgain,      // gathered in backward() from the x shard passed again
};

struct TpLinearDesc {
  std::string name = "linear";
  int64_t batch = 1;              // global B, a multiple of dp; gemm.py's reorder rules on
                                  // B/dp apply (PlanError at construction)
  int64_t seq_len = 1;            // global S (a multiple of tp)
  int64_t hidden_in = 1;          // K
  int64_t hidden_out = 1;         // N
  DType dtype = DType::kFloat32;  // every tensor: activations, weights, bias, gradients
  bool bias = true;
  bool transpose_batch_sequence = false;
  LinearPath path = LinearPath::kPolicy;
  WgradInput wgrad_input = WgradInput::kKeepFromForward;  // column-parallel only
  // FP8 training (see "FP8" above): mode kCurrentTensorScaling or kDelayedTensorScaling with its
  // recipe; formats e4m3 (the forward's). kNoScaling: every GEMM in `dtype`.
  QuantizationDesc quantization;
  DType grad_format = DType::kFloat8E5M2;  // the gradients' FP8 format: e5m2 (HYBRID) or e4m3
};

/// The forward GEMM a layer of `d` plans on `mesh` (the context's planning_mesh) with
/// `collective` (the column layer's all-gather, the row layer's reduce-scatter):
/// tensor_sequence_parallel_gemm's layout, on one replica where the mesh has an fsdp axis (see
/// the file comment). For memory estimates made before any layer. Throws cgemm::Error when the
/// batch does not divide over dp there.
GemmDesc tp_linear_forward_desc(const PlanningMesh& mesh, const TpLinearDesc& d,
                                CollectiveOp collective);

/// y = AG(x) W + b; see the file comment for shapes and specs.
class ColumnParallelLinear {
 public:
  ColumnParallelLinear(Context& ctx, TpLinearDesc desc);
  ~ColumnParallelLinear();
  ColumnParallelLinear(const ColumnParallelLinear&) = delete;
  ColumnParallelLinear& operator=(const ColumnParallelLinear&) = delete;

  static constexpr CollectiveOpSet kCollectives = CollectiveOpSet::create(CollectiveOp::kAllGather);

  const TpLinearDesc& desc() const { return desc_; }
  /// forward: x (lhs), W (rhs), b (bias) -> y (out).
  const GemmPlan& forward_plan() const { return *forward_; }
  /// dgrad: dy (lhs), W (rhs) -> dx (out).
  const GemmPlan& dgrad_plan() const { return *dgrad_; }
  /// wgrad: AG(x) (lhs), dy (rhs) -> dW (out).
  const GemmPlan& wgrad_plan() const { return *wgrad_; }

  /// y = AG(x) W + b (b null without a bias); with kKeepFromForward the forward GEMM also
  /// hands AG(x) to the layer for backward().
  void forward(const void* x, const void* w, const void* b, void* y);
  /// dx, dW and (with a bias) db from dy. x: this rank's shard again, read with kGatherAgain
  /// only (may be null with kKeepFromForward).
  void backward(const void* x, const void* w, const void* dy, void* dx, void* dw, void* db);
  /// FP8 layers: the same with the weight read from the caller's cache (weight_cache_desc()),
  /// quantized from W since the last optimizer step. backward() takes the cache forward() took
  /// (cgemm::Error otherwise); the pointer backward() follows a pointer forward() only.
  void forward(const void* x, const QuantizedTensor& w, const void* b, void* y);
  void backward(const void* x, const QuantizedTensor& w, const void* dy, void* dx, void* dw,
                void* db);
  /// The W shard the caller holds ([K, N/tp] in dtype) and where it lies in W [K, N].
  const Shape& weight_local() const { return weight_local_; }
  const Shape& weight_offset() const { return weight_offset_; }
  /// FP8 layers: the weight cache forward() and backward() take.
  QuantizedTensorDesc weight_cache_desc() const;
  /// Where an activation shard lies in the global activation, from the offset its forward or
  /// dgrad plan gives (lhs_offset(), out_offset()): with an fsdp axis those plans are one
  /// replica's, so this adds the replica's batch block (dp_rank x B/dp); else it is the offset.
  Shape activation_offset(Shape plan_offset) const;

 private:
  TpLinearDesc desc_;
  std::unique_ptr<GemmPlan> forward_, dgrad_, wgrad_, bgrad_;
  std::unique_ptr<ActivationGather> gather_;           // kGatherAgain only
  std::unique_ptr<detail::BackendMemory> gathered_x_;  // AG(x), forward_'s gathered lhs
  std::unique_ptr<detail::BackendMemory> ones_;        // the bias gradient's [B/dp, S] ones
  std::unique_ptr<FsdpWeightGather> fsdp_w_;           // fsdp > 1 only
  int64_t replica_batch_offset_ = 0;                   // fsdp > 1: dp_rank x B/dp
  bool have_x_ = false;
  Shape weight_local_, weight_offset_;
  Backend* backend_ = nullptr;
  // FP8: the layer's weight cache (pointer overloads), x's and dy's copies, AG(x) transposed.
  std::unique_ptr<QuantizedTensor> w8_, x8_, dy8_;
  std::unique_ptr<detail::BackendMemory> x_t_;
  const QuantizedTensor* forward_w_ = nullptr;  // the cache the last forward() read
};

/// y = RS(h W) + b; see the file comment for shapes and specs.
class RowParallelLinear {
 public:
  RowParallelLinear(Context& ctx, TpLinearDesc desc);
  ~RowParallelLinear();
  RowParallelLinear(const RowParallelLinear&) = delete;
  RowParallelLinear& operator=(const RowParallelLinear&) = delete;

  static constexpr CollectiveOpSet kCollectives =
      CollectiveOpSet::create(CollectiveOp::kReduceScatter);

  const TpLinearDesc& desc() const { return desc_; }
  /// forward: h (lhs), W (rhs), b (bias) -> y (out).
  const GemmPlan& forward_plan() const { return *forward_; }
  /// dgrad: dy (lhs), W (rhs) -> dh (out).
  const GemmPlan& dgrad_plan() const { return *dgrad_; }
  /// wgrad: h (lhs; FP8: h's colwise copy [K/tp, tokens]), AG(dy) (rhs) -> dW (out).
  const GemmPlan& wgrad_plan() const { return *wgrad_; }

  void forward(const void* h, const void* w, const void* b, void* y);
  /// dh, dW and (with a bias) db from dy (this rank's sequence shard). dh must not overlap h
  /// (cgemm::Error): the dgrad runs first, and the wgrad reads h after it. FP8: it may, the
  /// wgrad reading h's copy from the forward() of this h (cgemm::Error without one).
  void backward(const void* h, const void* w, const void* dy, void* dh, void* dw, void* db);
  /// FP8 layers: the same with the weight from the caller's cache (see the column layer's).
  void forward(const void* h, const QuantizedTensor& w, const void* b, void* y);
  void backward(const void* h, const QuantizedTensor& w, const void* dy, void* dh, void* dw,
                void* db);
  /// The W shard the caller holds ([K/tp, N] in dtype) and where it lies in W [K, N].
  const Shape& weight_local() const { return weight_local_; }
  const Shape& weight_offset() const { return weight_offset_; }
  QuantizedTensorDesc weight_cache_desc() const;
  /// Where an activation shard lies in the global activation, from the offset its forward or
  /// dgrad plan gives (lhs_offset(), out_offset()): with an fsdp axis those plans are one
  /// replica's, so this adds the replica's batch block (dp_rank x B/dp); else it is the offset.
  Shape activation_offset(Shape plan_offset) const;

 private:
  TpLinearDesc desc_;
  std::unique_ptr<GemmPlan> forward_, dgrad_, wgrad_, bgrad_;
  std::unique_ptr<detail::BackendMemory> gathered_dy_;  // AG(dy), dgrad_'s gathered lhs
  int64_t h_bytes_ = 0;                                 // h's (and dh's) local bytes
  std::unique_ptr<detail::BackendMemory> ones_;         // [B/dp, S] in dtype
  std::unique_ptr<FsdpWeightGather> fsdp_w_;            // fsdp > 1 only
  int64_t replica_batch_offset_ = 0;                    // fsdp > 1: dp_rank x B/dp
  Shape weight_local_, weight_offset_;
  Backend* backend_ = nullptr;
  // FP8: the layer's weight cache, h's copies (the forward's, read by the wgrad), dy's copy,
  // AG(dy) transposed.
  std::unique_ptr<QuantizedTensor> w8_, h8_, dy8_;
  std::unique_ptr<detail::BackendMemory> dy_t_;
  const QuantizedTensor* forward_w_ = nullptr;
  const void* forward_h_ = nullptr;  // FP8: the h whose copies h8_ holds (null: none)
};

}  // namespace cgemm
