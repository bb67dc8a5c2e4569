#pragma once
// Planning without a backend: the planner and the mesh alone produce a GEMM's plan and the
// bytes it needs on one rank. No Context, no backend, no MPI, no CUDA call: it runs where no
// GPU exists (cgemm-run --dry-run, the size and memory checks before any allocation).
// GemmPlan (plan.hpp) plans through the same function, so both always agree.
//
// Shapes are in elements, outermost dim first ([B, S, K], or [S, B, K] sequence-first);
// offsets are element offsets of this rank's shard in the global tensor, per dim; every byte
// count is in bytes (int64_t, computed in checked 64-bit arithmetic).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cgemm/gemm/gemm_task.hpp"
#include "cgemm/gemm/quantize_task.hpp"
#include "cgemm/runtime/options.hpp"
#include "cgemm/sharding/gemm_abstract.hpp"
#include "cgemm/sharding/gemm_sharding.hpp"

namespace cgemm {

/// A quantized GEMM (Transformer Engine's scaling modes): the plan quantizes the caller's
/// high-precision lhs and rhs (GemmDesc::dtype: float32, bfloat16 or float16) on every call and
/// runs the GEMM on the quantized copies, its output in GemmDesc::out_dtype. Per-tensor modes
/// take one scale per global tensor (its amax max-reduced over every rank of the job), so the
/// quantized values do not depend on the mesh. Rules as gemm.py's (_compatible_fp8_gemm_dtypes,
/// assert_cublas_requirements, the MXFP8 collective checks, NVFP4 refused with a collective).
///
/// Pre-quantized operands (the seed's ScaledTensor passed to gemm(): a cached FP8 weight, a
/// norm's FP8 output): with lhs_quantized (rhs_quantized) the caller's lhs (rhs) already holds
/// lhs_format (rhs_format) bytes, one per element, and its scale_inv (one float32 in backend
/// memory: the dequantized value is byte x scale_inv) comes in Operand::kLhsScaleInv
/// (kRhsScaleInv) on every call; the plan quantizes only the other operand. Per-tensor modes only
/// (current, delayed: the scale is the caller's, so the mode only sets how the other operand is
/// scaled). The scale_inv must be one value for the global tensor, the same on every rank, as
/// Transformer Engine's quantizers make it (reduce_amax: the amax max-reduced over the mesh;
/// QuantizedTensor, quantized_tensor.hpp, does the same): the all-gather moves only the FP8
/// bytes and every chunk's GEMM applies this rank's scale_inv. The GEMM's shape is the
/// operand as passed, and it must contract its trailing dims, the layout Hopper's FP8 GEMM
/// reads (gemm.py's NT rule; the seed picks the rowwise or colwise copy of a ScaledTensor2x for
/// it): an lhs [M..., K...], an rhs [N..., K...] (a [K, N] weight's colwise copy [N, K], with
/// contracting_dims rhs = {last}). GemmDesc::dtype stays the high-precision dtype of the
/// operand the plan quantizes.
struct QuantizationDesc {
  ScalingMode mode = ScalingMode::kNoScaling;
  DType lhs_format = DType::kFloat8E4M3;  // e4m3 or e5m2 (NVFP4: always e2m1)
  DType rhs_format = DType::kFloat8E4M3;
  ScalingRecipe recipe;  // delayed scaling's history and algo; the margin of both tensor modes
  bool lhs_quantized = false;  // the caller's lhs is lhs_format bytes, with its scale_inv
  bool rhs_quantized = false;  // the caller's rhs is rhs_format bytes, with its scale_inv
};

struct GemmDesc {
  std::string name = "gemm";
  Shape lhs_shape;                     // global
  Shape rhs_shape;                     // global
  std::optional<Shape> bias_shape;     // global [N]; nullopt: no bias
  DType dtype = DType::kBFloat16;      // lhs, rhs
  DType out_dtype = DType::kBFloat16;  // output and bias
  // How the caller's shards are sharded (padded with None, as JAX pads them). cgemm does not
  // reshard: each must be the planner's answer (infer_gemm_sharding), else plan_gemm throws
  // PlanError naming the given and the planner's spec. bias_spec is checked so only with a
  // bias (unread without one); gemm.py shards the bias as the rhs's non-contracting dim
  // whatever it is given (_parse_operand_output_specs: bias_specs = rhs_non_cspecs), e.g.
  // (tpsp) in the all-gather layout and (None) in the reduce-scatter one.
  PartitionSpec lhs_spec, rhs_spec, bias_spec;
  ContractingDims contracting_dims{{-1}, {0}};
  CollectiveOp collective = CollectiveOp::kNone;
  bool transpose_batch_sequence = false;
  QuantizationDesc quantization;  // mode kNoScaling: the GEMM runs in `dtype`
  // FSDP's weight gradient (docs/FSDP.md): -1 (the default), or the output dim over which a
  // plain GEMM's sum over the fsdp group is scattered instead of all-reduced (ZeRO's
  // reduce-scatter; JAX's psum_scatter). The planner must reduce the output over the fsdp axis
  // (both contracting dims sharded over it, e.g. dW = x^T dy over the tokens); the dim is the
  // output's first (its rows, [K, N] by K) or the first of the rhs's non-contracting dims (its
  // columns, by N), None in the planner's output spec and divisible by fsdp. The output then
  // comes sharded over the fsdp axis on that dim (PlanDescription::out_spec), as the weight
  // whose gradient it is; a bias is added after the sum.
  int fsdp_scatter_dim = -1;
};

/// The dtype of the bytes a caller passes as the lhs (rhs) of `d`: the FP8 format of a
/// pre-quantized operand, else d.dtype.
inline DType lhs_input_dtype(const GemmDesc& d) {
  return d.quantization.lhs_quantized ? d.quantization.lhs_format : d.dtype;
}
inline DType rhs_input_dtype(const GemmDesc& d) {
  return d.quantization.rhs_quantized ? d.quantization.rhs_format : d.dtype;
}

/// The dp x fsdp x tp mesh (tp resolved, >= 1), its axis names, and the rank being planned:
/// world rank (dp_rank * fsdp + fsdp_rank) * tp + tp_rank (a TP group is tp consecutive
/// ranks; mesh_comms.hpp).
struct PlanningMesh {
  int dp = 1;
  int tp = 1;
  std::string dp_axis = "dp";
  std::string tpsp_axis = "tpsp";
  int dp_rank = 0;
  int tp_rank = 0;
  int fsdp = 1;
  std::string fsdp_axis = "fsdp";
  int fsdp_rank = 0;
};

/// Throws cgemm::Error unless the dp and tpsp axis names are non-empty and different, and, where
/// the mesh has an fsdp axis (fsdp > 1), its name too (unused without one).
void require_axis_names(const std::string& dp, const std::string& tpsp, int fsdp,
                        const std::string& fsdp_axis);

/// What planning takes from the backend, given as options instead.
struct PlanningOptions {
  OverlapOptions overlap;
  BackendKind backend = BackendKind::kCuda;  // kAuto plans as kCuda
  int compute_capability = 90;               // e.g. 90 (Hopper); <= 0 plans for 90
  int backend_streams = 0;  // compute streams the backend has; 0: num_max_streams (both do)
};

/// Bytes of the workspaces of one path (the engine's buffers, runtime/src/program/program.hpp).
struct WorkspaceSizes {
  int64_t ring = 0;       // symmetric over the TP group
  int64_t send = 0;       // partials read by the transport
  int64_t work_in = 0;    // the sequential path's gathered or reordered lhs
  int64_t work_out = 0;   // the sequential path's GEMM results before a collective or reorder
  int64_t quant = 0;      // quantized operands, their block scales and amaxes (FP8)
  int64_t scales = 0;     // the scale state of the quantized operands, kept across calls (FP8)
  int64_t host = 0;       // host memory the host reads mid-program (a grouped GEMM's sizes)
  int64_t fsdp_ring = 0;  // symmetric over the fsdp group: the gathered rhs shards (FSDP)
  /// The backend memory: every workspace but host.
  int64_t total() const;
};

/// The bytes one rank needs for one GEMM, on the planned backend.
struct PlanBytes {
  // This rank's operand shards (the caller's buffers); bias 0 without a bias.
  int64_t lhs = 0, rhs = 0, bias = 0, out = 0;
  WorkspaceSizes overlapped, sequential;
  // The workspaces the plan holds from when it is made: each buffer at the largest size any
  // path execute() may run needs (both paths, and their gathered-lhs variants).
  int64_t workspace = 0;
  // Of workspace: the fsdp ring this plan needs, which the plans of one Context share
  // (Context::fsdp_ring_bytes): a block of plans needs the largest, not the sum.
  int64_t fsdp_ring = 0;
  // CUDA: the cuBLAS workspace of one stream, and gemm_abstract's workspace (one per stream
  // of a collective GEMM, plus 256 bytes of alignment). 0 on the CPU backend.
  int64_t cublas_workspace_per_stream = 0;
  int64_t cublas_workspace = 0;
  // CPU: the fp64 copies of the operands cpu_gemm makes of the largest GEMM call (kept
  // between calls), and the largest fp32 temporary of a sum or collective. 0 on CUDA.
  int64_t cpu_fp64_copies = 0;
  int64_t cpu_scratch = 0;

  int64_t operands() const;  // lhs + rhs + bias + out
  /// operands + workspace + (CUDA) cublas_workspace or (CPU) cpu_fp64_copies + cpu_scratch.
  int64_t total() const;
};

/// One GEMM of a planned program as tools see it (cgemm-bench --parts times these alone): the
/// task with null pointers, and where it reads its lhs and writes its output, as a buffer
/// name and a byte offset. Buffers are the caller's operand slots ("lhs", "rhs", "out":
/// operands.hpp) or the plan's workspaces ("ring", "send", "work_in", "work_out"; bytes in
/// WorkspaceSizes).
struct ProgramGemm {
  GemmTask task;
  std::string lhs_buffer, rhs_buffer, out_buffer;
  int64_t lhs_offset = 0, rhs_offset = 0, out_offset = 0;  // bytes
  int stream = 0;
  std::string label;
};

/// One exchange group of a planned program: the bytes this rank sends in it (all transfers).
struct ProgramExchange {
  int64_t bytes = 0;
  int transfers = 0;
};

/// A read-only view of one program: its GEMMs and exchanges in issue order.
struct ProgramView {
  std::vector<ProgramGemm> gemms;
  std::vector<ProgramExchange> exchanges;
};

/// A GEMM planned for one rank.
struct PlanDescription {
  GemmDesc desc;
  GemmSharding sharding;  // the planner's specs (lhs, rhs, bias, out, reduce axis)
  GemmAbstract abstract;  // gemm_abstract on the local shapes
  Shape lhs_local, rhs_local, bias_local, out_local;  // bias_local {0} without a bias
  Shape out_global;
  /// FSDP (runtime/src/fsdp/fsdp_gather.hpp): the rhs dim the caller gives sharded over the
  /// fsdp axis and the plan gathers (gemm.py's answer there is None), or -1. rhs_local and
  /// rhs_offset are then the caller's shard; rhs_gathered the rhs the GEMM multiplies by
  /// (sharding.rhs's local shape).
  int fsdp_dim = -1;
  Shape rhs_gathered;
  PartitionSpec rhs_spec;  // the caller's rhs's: sharding.rhs, with the fsdp axis on fsdp_dim
  PartitionSpec out_spec;  // the output's: sharding.out, with the fsdp axis on fsdp_scatter_dim
  Shape lhs_offset, rhs_offset, bias_offset, out_offset;  // bias_offset {0} without a bias
  /// The collective GEMM's schedule: "all_gather: 4 chunks of 128 rows in 4 steps on 3
  /// stream(s), ..." (no transport: that is the backend's, see predict_transport).
  std::string schedule_summary;
  bool overlappable = false;  // false: a plain GEMM, nothing to overlap
  int chunks = 1;             // GEMM chunks of the overlapped path (tp x chunks_per_rank)
  int64_t chunk_rows = 0;     // rows of one chunk's GEMM (one piece; per batch block when strided)
  int num_streams = 1;        // compute streams the schedule uses
  int64_t gemm_rows = 0;      // rows of all the GEMM work of one call
  double local_flops = 0.0;   // FLOPs of this rank's GEMM work in one call
  PlanBytes bytes;
  ProgramView overlapped, sequential;  // the two paths' programs, as planned for this rank
};

/// Plans `desc` for rank (mesh.dp_rank, mesh.tp_rank) of `mesh`: partition specs
/// (infer_gemm_sharding), local shapes and offsets, the output (gemm_abstract), the reorder
/// checks, the collective GEMM's programs and the bytes they need.
/// Throws PlanError when gemm.py would raise, when a given spec (lhs, rhs, bias) is not the
/// planner's, or when the split leaves chunks of 0 rows; cgemm::Error for layouts the runtime
/// does not run, a bad mesh, or a size, element count or byte count that overflows int64.
/// Among those layouts: an output the planner reduces (gemm.py's reduce_spec: both
/// contracting dims sharded over one axis) with collective all_gather, whose schedule runs no
/// reduction, or with collective none over an axis other than tp or dp (gemm.py then sums over
/// it and adds the bias after the sum; the plain GEMM all-reduces over tp or dp, and over fsdp
/// or ('dp', 'fsdp') on a mesh with an fsdp axis).
PlanDescription plan_gemm(const GemmDesc& desc, const PlanningMesh& mesh,
                          const PlanningOptions& options = {});

/// The standard tensor-sequence-parallel layouts on `mesh`'s axis names (plan.hpp's
/// tensor_sequence_parallel_gemm, without a Context).
GemmDesc tensor_sequence_parallel_gemm(const PlanningMesh& mesh, std::string name,
                                       CollectiveOp collective, int64_t batch, int64_t seq_len,
                                       int64_t hidden_in, int64_t hidden_out, DType dtype,
                                       bool bias, bool transpose_batch_sequence);

/// The transport a rank's ring would use, by the backends' rule: "mpi" on the CPU backend;
/// on CUDA "none (tp = 1)" for tp 1, "copy-engine (CUDA IPC)" when the whole TP group is on
/// one host and use_ce (always, with gpu_sharing), else "nccl". The names are
/// Backend::transport()'s.
/// With `transport` forced (TransportKind), the one it names where the backend has it ("ucx",
/// "mpi", "nccl", "copy-engine (CUDA IPC)"), else "refused: <why>", as a real run refuses it
/// (ucx in a build without UCX included).
std::string predict_transport(BackendKind backend, int tp, bool tp_group_on_one_host, bool use_ce,
                              TransportKind transport = TransportKind::kAuto);

}  // namespace cgemm
