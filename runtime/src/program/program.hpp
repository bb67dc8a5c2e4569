#pragma once
// A collective GEMM as a program: the backend calls of one call of a plan, in issue order,
// with buffers named symbolically. Each collective GEMM (runtime/src/kinds/) writes its
// programs once, at planning; the engine (engine.hpp) runs them on any backend, binding the
// caller's operands and the plan's workspaces on every call. The engine knows the kinds of
// operation below and nothing about the collectives.
//
// A new kind of operation is a new struct here and a new alternative of Op; every visitor of
// Op (the engine, access() in program.cpp, the planner's CPU scratch count and its program
// view in plan_description.cpp) handles each alternative by name, so one that forgets the new
// op does not compile. Keep the op structs unrelated types: one derived from another would be
// taken by its base's lambda.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cgemm/collective/group.hpp"
#include "cgemm/gemm/gemm_task.hpp"
#include "cgemm/runtime/grouped_task.hpp"
#include "cgemm/runtime/operands.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "cgemm/sharding/reorder.hpp"
#include "overloaded.hpp"  // Overloaded, for the ops' visitors

namespace cgemm {

/// The plan's own buffers, allocated when the plan is made (Engine::prepare) and kept (sizes in
/// WorkspaceSizes).
enum class Workspace {
  kRing,      // symmetric over Program::ring_group: chunks or partials arriving from peers
  kSend,      // partials computed for other ranks, read by the transport
  kWorkIn,    // input side of the sequential path: the gathered or reordered lhs
  kWorkOut,   // output side of the sequential path: GEMM results before a collective or reorder
  kQuant,     // this call's quantized operands, their block scales and amaxes
  kScales,    // the scale state of each quantized operand (quantize_task.hpp's layout): kept
              // across calls and shared by both paths, set to Program::scales_init once
  kHost,      // HOST memory: values the host itself reads mid-program (a grouped GEMM's sizes)
  kFsdpRing,  // symmetric over the fsdp group: the rhs shards an FSDP gather brings in, one
              // slot per fsdp rank (runtime/src/fsdp/fsdp_gather.hpp)
};

/// Every workspace, in enum order.
inline constexpr std::array<Workspace, 8> kWorkspaces{
    Workspace::kRing,  Workspace::kSend,   Workspace::kWorkIn, Workspace::kWorkOut,
    Workspace::kQuant, Workspace::kScales, Workspace::kHost,   Workspace::kFsdpRing};

/// A place in a buffer: `offset` bytes into one of the caller's operands (operands.hpp) or
/// one of the plan's workspaces.
struct Ref {
  std::variant<Operand, Workspace> buf = Operand::kLhs;
  size_t offset = 0;
  /// The place `bytes` further on in the same buffer.
  Ref plus(size_t bytes) const { return {buf, offset + bytes}; }
};

/// Later work on every stream and on the transport waits for stream 0 (Backend::fork_streams).
struct ForkOp {};
/// Later work on `stream` waits for every compute stream (Backend::join_streams).
struct JoinOp {
  int stream = 0;
};

/// Where a quantized GEMM finds its scales (GemmTask's scale pointers); unset: none.
struct GemmScales {
  std::optional<Ref> lhs_scale_inv, rhs_scale_inv;  // one fp32 each
  std::optional<Ref> lhs_block, rhs_block;          // MXFP8 / NVFP4 block scales
};

/// One GEMM: `task` holds its shape, dtypes, layouts, leading dimensions, strides, alpha and
/// beta; the engine binds lhs, rhs and out (and bias and scales when set) to the task's
/// pointers.
struct GemmOp {
  GemmTask task;
  Ref lhs, rhs, out;
  std::optional<Ref> bias;  // fused in the epilogue
  int stream = 0;
  std::string label;
  GemmScales scales = {};
};

/// One transfer of an exchange group: `bytes` from `src` to rank send_peer of the exchange's
/// group, landing in its ring at send_offset; and from recv_peer into this rank's ring at
/// recv_offset.
struct Transfer {
  Ref src;
  size_t bytes = 0;
  int send_peer = -1;
  size_t send_offset = 0;
  int recv_peer = -1;
  size_t recv_offset = 0;
  std::string label;
};

/// Starts an exchange group after the work issued on `after_stream` (-1: no such dependency);
/// its token goes to slot `token` of the run. Exchanges run one after another in start order
/// (Backend's FIFO), so waiting for a token also waits for every exchange started before it.
/// The transfers land in `ring`, a workspace symmetric over `group`: kRing (over the program's
/// ring_group) or kFsdpRing (over the fsdp group).
struct ExchangeOp {
  std::vector<Transfer> transfers;
  int after_stream = -1;
  int token = 0;
  Group group = Group::kTp;
  Workspace ring = Workspace::kRing;
};

/// Later work on `stream` waits for the exchange in token slot `token`.
struct WaitOp {
  int token = 0;
  int stream = 0;
};

/// out = sum of parts in order, in fp32, cast to out_dtype; with a bias (broadcast over rows of
/// bias_len) that sum is rounded to out_dtype first, then the bias added and rounded again, as
/// gemm.py reduces in the output dtype and then does output += bias (both backends' kernels).
struct SumOp {
  std::vector<Ref> parts;
  DType part_dtype = DType::kBFloat16;
  int64_t count = 0;
  std::optional<Ref> bias;
  int64_t bias_len = 0;
  Ref out;
  DType out_dtype = DType::kBFloat16;
  int stream = 0;
};

struct ReorderOp {
  ReorderKind kind = ReorderKind::kTpspLeading;
  Shape shape;
  int dp = 1;
  Ref src, dst;
  DType dtype = DType::kBFloat16;
  int stream = 0;
};

/// `count` blocks of `bytes` on `stream` (Backend::copy each): block i from src + i src_stride
/// to dst + i dst_stride. A chunk of a batch-first lhs is `count` batch blocks that lie apart
/// in the gathered tensor, so one chunk is one op however its rows are placed.
struct CopyOp {
  Ref src, dst;
  size_t bytes = 0;
  int64_t count = 1;
  size_t src_stride = 0, dst_stride = 0;
  int stream = 0;
  std::string label;
};

/// Collectives over `group` (Backend::all_gather etc.): the sequential path's over tp, the
/// gradient sum's all-reduce over dp.
struct AllGatherOp {
  Ref src, dst;
  size_t bytes_per_rank = 0;
  int stream = 0;
  std::string label;
  Group group = Group::kTp;
};
struct ReduceScatterOp {
  Ref src, dst;
  DType dtype = DType::kBFloat16;
  int64_t count_per_rank = 0;
  int stream = 0;
  std::string label;
  Group group = Group::kTp;
};
struct AllReduceOp {
  Ref buf;
  DType dtype = DType::kBFloat16;
  int64_t count = 0;
  int stream = 0;
  std::string label;
  Group group = Group::kTp;
};

/// Quantization (quantize_task.hpp; runtime/src/quantization/quantization.cpp writes these ops).
/// amax = max |src| over this rank's `count` elements (Backend::amax).
struct AmaxOp {
  Ref src;
  DType dtype = DType::kBFloat16;
  int64_t count = 0;
  Ref amax;
  int stream = 0;
};
/// `count` amaxes, max-reduced over every rank of the job (Backend::all_reduce_max).
struct AmaxReduceOp {
  Ref amax;
  int count = 0;
  int stream = 0;
  std::string label;
};
/// One operand's scale from its amax (Backend::update_scale); `update`'s pointers unset.
struct ScaleOp {
  ScaleUpdate update;
  Ref state, amax;
  int stream = 0;
};
/// One operand quantized (Backend::quantize); `task`'s pointers unset.
struct QuantizeOp {
  QuantizeTask task;
  Ref src, dst, state;
  std::optional<Ref> block_scale;
  int stream = 0;
  std::string label;
  // Set: the cast also writes max |src| there (QuantizeTask::amax), in place of an AmaxOp.
  std::optional<Ref> amax = std::nullopt;
};

/// A grouped GEMM's sizes (GroupedGemmOp) from backend memory to the host workspace: `count`
/// int32 values, synchronously (Backend::copy_to_host: the host waits for the device). Its own
/// op so that the host round trip is visible in the program and a CUDA-graph capture refuses it
/// by name.
struct GroupSizesToHostOp {
  Ref src, dst;  // dst: Workspace::kHost
  int64_t count = 0;
  std::string label;
};

/// One grouped GEMM call (Backend::grouped_gemm, grouped_task.hpp): `shape` is fixed at
/// planning; the engine checks the host sizes (check_group_sizes) before issuing it, where
/// there are any, and binds the buffers to the task's pointers.
struct GroupedGemmOp {
  GroupedGemmShape shape;
  Ref lhs, rhs, out;
  std::optional<Ref> bias;
  /// G int32 on the host: Workspace::kHost or kHostGroupSizes; none when shape.device_sizes
  /// and the call gave them in backend memory (the backend reads them there).
  std::optional<Ref> host_sizes;
  std::optional<Ref> sizes;  // the same in backend memory, when the call gave them there
  std::optional<Ref> lhs_scale_inv, rhs_scale_inv;  // FP8: group g's at g * scale_stride
  int64_t scale_stride = 0;
  int stream = 0;
  std::string label;                      // the plan's name
  std::vector<std::string> group_labels;  // "NAME group g"
};

using Op = std::variant<ForkOp, JoinOp, GemmOp, ExchangeOp, WaitOp, SumOp, ReorderOp, CopyOp,
                        AllGatherOp, ReduceScatterOp, AllReduceOp, AmaxOp, AmaxReduceOp, ScaleOp,
                        QuantizeOp, GroupSizesToHostOp, GroupedGemmOp>;

struct Program {
  std::vector<Op> ops;
  WorkspaceSizes workspace;       // bytes of each workspace the ops use (0: none)
  int tokens = 0;                 // exchange token slots the ops use
  Group ring_group = Group::kTp;  // the group kRing is symmetric over (its exchanges' group)
  /// What kScales holds before the first call (floats; its size is workspace.scales bytes):
  /// every path of a plan has the same, since they share the state.
  std::vector<float> scales_init;

  /// The caller's operand slots any op reads or writes, in enum order.
  std::vector<Operand> operands_used() const;
  /// Throws cgemm::Error naming `gemm` when an op writes a caller's slot that the call only
  /// reads (checked at planning, so a bad program never starts on one rank only).
  void check_writes(const std::string& gemm) const;
};

/// Whether an op kind can be captured into a CUDA graph and replayed: the ground the CUDA-graph
/// work builds on (a capture refuses, before recording anything, a program with an op that
/// cannot). Each kind answers in capture_trait(), by name: a new kind that does not answer
/// does not compile.
enum class Capture {
  kDevice,     // stream-ordered device work, no host wait: capturable (a GEMM once it has run
               // uncaptured: cuBLASLt's algorithm for a shape is chosen, and may be timed, on
               // its first call)
  kTransport,  // moves data between ranks: capturable where the backend's transport is
               // (Backend::capture_refusal)
  kHost,       // needs this host mid-program (a copy back, an MPI call): never
};
struct CaptureTrait {
  Capture capture = Capture::kDevice;
  const char* why = "";  // kHost: why, as a clause
};
CaptureTrait capture_trait(const Op& op);

/// "" when every op of `p` can be captured on a backend whose transports answer
/// `transport_refusal` (Backend::capture_refusal(): "" when capturable); else one line naming
/// the first op that cannot (its kind and label) and why.
std::string capture_refusal(const Program& p, const std::string& transport_refusal);

/// Throws cgemm::Error naming `gemm` and the slot when a slot of `used` is null in `x` (a
/// missing bias keeps the message "GEMM 'NAME' was planned with a bias but got none").
void require_operands(const std::string& gemm, const std::vector<Operand>& used, const Operands& x);

/// Bytes of workspace `w` in `s`.
int64_t& workspace_bytes(WorkspaceSizes& s, Workspace w);
int64_t workspace_bytes(const WorkspaceSizes& s, Workspace w);
/// "ring", "send", "work_in", "work_out", "quant", "scales" or "host".
const char* workspace_name(Workspace w);

}  // namespace cgemm
