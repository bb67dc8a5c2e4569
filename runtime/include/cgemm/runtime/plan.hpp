#pragma once
// A GEMM described by its global operands and PartitionSpecs, planned by the sharding
// planner (as Transformer Engine's gemm.py) and executed on every rank's local shards.
//
// Supported layouts (runtime/src/plan/gemm_layout.hpp): every layout that is one 2-D GEMM on the
// operands as stored, i.e. each operand's contracting dims (consecutive, as gemm.py requires)
// at one of its ends:
//  - collective none (a plain GEMM): lhs [M..., K...] (contracting its trailing dims) or
//    [K..., M...] (its leading dims: a weight gradient's x^T), rhs [K..., N...] or
//    [N..., K...], any number of contracting dims, the output [M..., N...] (gemm.py's
//    abstract: lhs non-contracting dims, then rhs non-contracting dims), the bias [N...].
//    The contracting dims are contracted in storage order, flattened, as gemm.py's lowering
//    does. A quantized GEMM quantizes a transposed operand into its NT copy.
//  - all_gather, reduce_scatter: lhs [B, S, K...] (or, with transpose_batch_sequence,
//    [S, B, K...]) contracting its trailing dims, one or several ([B, S, H, D] contracting
//    (2, 3)); rhs [K..., N...] or [N..., K...] as the plain GEMM's (TE's gated-MLP kernel
//    [K, 2, N]); the bias [N...]. The reduce-scatter also takes a transposed lhs
//    [K..., B, S] (or [K..., S, B]) when it needs no reorder (transpose_batch_sequence or a
//    local batch of 1; FP8 in any case, from its [M, K] copy); the all-gather does not (its
//    ring moves the lhs's rows).
// Other layouts (contracting dims in the middle of an operand; the all-gather on a transposed
// lhs) are planned but rejected by the runtime with a cgemm::Error naming the layout.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cgemm/runtime/captured_call.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/operands.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "cgemm/sharding/gemm_abstract.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"

namespace cgemm {

// GemmDesc: plan_description.hpp.

struct Program;  // runtime/src/program/program.hpp: what a call issues

/// The standard tensor-sequence-parallel layouts (as Megatron and TE's tests use them):
///  all_gather:     x (dp, tpsp, None) [B, S, K] @ w (None, tpsp) [K, N] + b (tpsp)
///                  -> out (dp, None, tpsp) [B, S, N]
///  reduce_scatter: x (dp, None, tpsp) @ w (tpsp, None) + b (None) -> out (dp, tpsp, None)
///  none:           as reduce_scatter's operands, the output all-reduced: (dp, None, None)
/// With transpose_batch_sequence the activations are [S, B, H] and the first two entries
/// of each activation spec swap.
GemmDesc tensor_sequence_parallel_gemm(const Context& ctx, std::string name,
                                       CollectiveOp collective, int64_t batch, int64_t seq_len,
                                       int64_t hidden_in, int64_t hidden_out, DType dtype,
                                       bool bias, bool transpose_batch_sequence);

/// What GemmPlan plans with on ctx (plan_description.hpp's plan_gemm takes them): this rank's
/// place in ctx's mesh, and ctx's overlap options and backend (kind, compute capability,
/// streams). A tool that asks plan_gemm about a plan before making it (its bytes, say) passes
/// these, so both answer alike.
PlanningMesh planning_mesh(const Context& ctx);
PlanningOptions planning_options(const Context& ctx);

class GemmPlan {
 public:
  /// Plans `desc` on ctx's mesh with plan_gemm (plan_description.hpp), taking the backend
  /// kind, compute capability and stream count from ctx's backend: partition specs
  /// (infer_gemm_sharding), local shapes, the output shape and workspace (gemm_abstract), the
  /// reorder checks. Then it allocates every workspace execute() uses (PlanBytes::workspace:
  /// the ring symmetrically over the TP group, so making a plan is collective: every rank
  /// makes the same plans in the same order) and sets the FP8 scale state, so no call
  /// allocates the plan's workspaces; a failed allocation on any rank throws cgemm::Error on
  /// every rank (naming the rank). Throws PlanError when gemm.py would raise, cgemm::Error for
  /// layouts the runtime does not run.
  GemmPlan(Context& ctx, GemmDesc desc);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  const GemmDesc& desc() const { return desc_; }
  const GemmSharding& sharding() const { return sharding_; }
  const GemmAbstract& abstract() const { return abstract_; }
  /// This rank's shard shapes.
  const Shape& lhs_local() const { return lhs_local_; }
  const Shape& rhs_local() const { return rhs_local_; }
  const Shape& bias_local() const { return bias_local_; }  // {0} without bias
  const Shape& out_local() const { return out_local_; }
  const Shape& out_global() const { return out_global_; }
  /// The shape of Operand::kGatheredLhs, the lhs an all-gather GEMM gathers, which a call may
  /// ask for (operands.hpp): lhs_local() with its sequence dim (1 batch-first, 0 with
  /// transpose_batch_sequence) times tp, i.e. this dp rank's [B/dp, S, K] (or [S, B/dp, K]) in
  /// sequence order, the same bytes ActivationGather (activation_gather.hpp) writes from the
  /// same shards, in lhs_input_dtype(desc()) (a pre-quantized lhs: its FP8 bytes, valid with
  /// the call's lhs scale_inv). Empty where the plan hands none out: other collectives, and
  /// GEMMs that quantize their lhs (their ring carries the plan's quantized copy, not the
  /// caller's tensor).
  const Shape& gathered_lhs_local() const;
  /// Offsets of this rank's shards in the global tensors (for generating inputs).
  Shape lhs_offset() const;
  Shape rhs_offset() const;
  Shape bias_offset() const;
  /// Offset of this rank's output shard in the global output (replicated dims: 0).
  Shape out_offset() const;
  /// Everything plan_gemm (plan_description.hpp) says of this plan: the same shapes,
  /// offsets, schedule and bytes a dry run computes without a backend.
  const PlanDescription& description() const;
  /// FLOPs of this rank's GEMM work in one call.
  double local_flops() const;
  /// One line: collective, chunking, streams, transport.
  std::string schedule_summary() const;

  /// The collective GEMM on this rank's shards (backend memory, in the slots of
  /// operands.hpp: lhs, rhs, out, and bias when the plan has one), on the path the overlap
  /// policy picks (OverlapOptions::policy; kAuto's rule is decided at planning, from the
  /// shape and the mesh, the same on every run). Asynchronous on the CUDA backend after that.
  /// Throws cgemm::Error naming the slot when one the plan uses is null.
  ///
  /// `stream`: the caller's stream, as its native handle (a cudaStream_t, passed as void* so
  /// this header needs no CUDA header; the legacy default stream is cudaStreamLegacy, not
  /// null). Given, the call is ordered on it with events and no host wait: the backend's
  /// stream 0 waits for the work queued on `stream` before the call (an event recorded on it),
  /// the plan's streams fork from stream 0 as always, and at the end `stream` waits for every
  /// stream of the plan (an event recorded on each), so work queued on `stream` after the call
  /// sees its output. The stream must belong to the backend's device (else cgemm::Error from
  /// the failed cudaEventRecord). Null (the default): exactly the call without it, on stream 0
  /// (Backend::native_stream(): order your producers and consumers against that yourself). The
  /// CPU backend ignores it: its calls are synchronous, the output is there on return. Why
  /// events around the call and not the caller's stream as stream 0: the engine and its
  /// programs stay the same for both, and the plan's stream priorities are kept.
  ///
  /// Operand::kGatheredLhs (optional, gathered_lhs_local() in lhs_input_dtype; must not overlap
  /// another operand): the call also writes the lhs it gathers there, on either path, with no
  /// second collective (Transformer Engine's layers reuse it for the weight gradient: the
  /// row-parallel wgrad's AG(dy), the column-parallel wgrad's AG(x)). The overlapped path
  /// copies each ring chunk there behind its GEMM, on that GEMM's stream; the sequential path
  /// gathers into it. Null: the call is exactly the one without it. Throws cgemm::Error, before
  /// any work, when the plan has no gathered lhs to hand out: a reduce-scatter or plain GEMM,
  /// or a GEMM that quantizes its lhs (the message says which).
  ///
  /// Pre-quantized operands (QuantizationDesc::lhs_quantized / rhs_quantized): the call also
  /// takes Operand::kLhsScaleInv / kRhsScaleInv, one float32 each in backend memory, read on the
  /// plan's streams after the call's start (stream-ordered like the operands).
  void execute(const Operands& x, void* stream = nullptr);
  /// Always the overlapped schedule (schedule.hpp; runtime/src/kinds/), whatever the
  /// policy.
  void execute_overlapped(const Operands& x, void* stream = nullptr);
  /// The sequential path: the collective, then the GEMM (all-gather), or the GEMM, then the
  /// collective (reduce-scatter / all-reduce), the planner's reorders as passes.
  void execute_sequential(const Operands& x, void* stream = nullptr);
  /// The same with the dense GEMM's four operands; bias may be nullptr only when the plan has
  /// no bias.
  void execute(const void* lhs, const void* rhs, const void* bias, void* out,
               void* stream = nullptr) {
    execute(Operands(lhs, rhs, bias, out), stream);
  }
  void execute_overlapped(const void* lhs, const void* rhs, const void* bias, void* out,
                          void* stream = nullptr) {
    execute_overlapped(Operands(lhs, rhs, bias, out), stream);
  }
  void execute_sequential(const void* lhs, const void* rhs, const void* bias, void* out,
                          void* stream = nullptr) {
    execute_sequential(Operands(lhs, rhs, bias, out), stream);
  }
  /// The call execute(x, stream) would make, captured into a CUDA graph from the caller's
  /// `stream` (captured_call.hpp; a created stream of the backend's device, not capturing yet;
  /// null: the backend's stream 0) and instantiated, for replays. Nothing runs now. Checked first,
  /// before anything is recorded: the operands as execute checks them, then whether every op of the
  /// path and the backend's transports can be captured; else cgemm::Error "GEMM 'NAME' cannot be
  /// captured into a CUDA graph: " naming the op or transport that cannot (the UCX staged
  /// transport, a dp group through the host, a trace being taken). Every rank of the plan's groups
  /// must capture the same calls (their exchanges pair up at replay as at an eager call).
  ///
  /// The same call may also be issued inside the caller's own capture (execute with a stream
  /// under cudaStreamBeginCapture, torch.cuda.graph): the same checks, refused the same way
  /// before anything is recorded. Either way a GEMM whose algorithm was never chosen is chosen
  /// untimed inside a capture (the heuristic's first): run the call once before capturing to
  /// keep the timed choice. The staging buffers of the plan's collectives are made with the
  /// plan (Engine::prepare), so no capture of its calls allocates.
  ///
  /// A replay is ordered with the backend's work as an eager call is, whatever stream it is
  /// launched on: it starts after everything issued on the backend's streams before it, and
  /// what is issued there after it starts after it.
  CapturedCall capture(const Operands& x, void* stream);
  /// Which path execute() takes, and why (for reports).
  std::string path_summary() const;
  bool uses_overlap() const;

  /// Quantized GEMMs (GemmDesc::quantization): the scale state of lhs and rhs, the lhs's then
  /// the rhs's, each as quantize_task.hpp's ScaleStateLayout (scale, scale_inv, amax, and for
  /// delayed scaling the step count and the amax history). Transformer Engine keeps the same as
  /// its FP8 meta: save it with a checkpoint and set it back to resume, or set it to run two
  /// calls from the same scales. Synchronous (waits for the plan's work). Empty for an
  /// unquantized GEMM; set_scale_state throws cgemm::Error when the size differs.
  std::vector<float> scale_state();
  void set_scale_state(const std::vector<float>& state);

  /// Benchmark pieces, with no meaningful output: the whole local GEMM in one call as the
  /// sequential path computes it, and the collective alone. Sequential = both in order.
  void bench_gemm_only(const void* lhs, const void* rhs, void* out);
  void bench_collective_only(const void* lhs, void* out);

  /// Private state (runtime/src/plan/plan_impl.hpp).
  struct Impl;

 private:
  // The program execute() runs for `x` on the overlapped or the sequential path, its operands
  // checked.
  const Program& program_for(const Operands& x, bool overlapped) const;

  Context& ctx_;
  GemmDesc desc_;
  GemmSharding sharding_;
  GemmAbstract abstract_;
  Shape lhs_local_, rhs_local_, bias_local_, out_local_, out_global_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgemm
