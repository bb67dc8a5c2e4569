#pragma once
// A grouped GEMM (the expert GEMMs of a mixture-of-experts layer) as Transformer Engine's JAX
// gemm.py `grouped_gemm` has it: G GEMMs in one call, one dim ragged, the G group sizes given
// per call. The descriptor goes through the sharding planner's grouped_gemm
// (cgemm/sharding/grouped_gemm.hpp), so every shape, dtype and bias rule and every error of
// gemm.py's Python side is the planner's; the runtime runs the layouts below and refuses the
// others with one cgemm::Error naming the layout. docs/GROUPED_GEMM.md has the whole story: the
// layouts in detail, the FP8 rules and why, gemm.py's lines, the CUDA paths and their timings.
//
// Through the engine, as GemmPlan: the plan writes its call as a program (runtime/src/
// program/program.hpp: the sizes copied to the host, an explicit op, then one grouped GEMM op,
// Backend::grouped_gemm) when it is made, prepares it (the engine's workspaces and the
// backend's state for the path: the CUDA runners' handles, staging and workspace, sized for the
// ragged extent, the most rows or contracting indices a call brings), and runs it on every call
// with the caller's operands (operands.hpp) and, if given, the caller's stream.
//
// Forms (row-major; G = num_groups): kRaggedRows (forward, dgrad): lhs [M, K] or [K, M], rhs
// [G, K, N] or [G, N, K], out [M, N], group g owns rows [off_g, off_g + size_g) of lhs and out.
// kRaggedContracting (wgrad): lhs [K, M] or [M, K], rhs [K, N] or [N, K], out [G, M, N], group
// g owns contracting indices [off_g, off_g + size_g). Empty groups are allowed in both.
// N-D operands collapse at gemm.py's axis boundary into these shapes of the same memory: each
// operand's contracting dims consecutive at one end (after G for the ragged-rows rhs), e.g. lhs
// [B, S, K] or rhs [G, N1, N2, K]; the output keeps the planner's N-D shape.
// Dtypes: lhs and rhs bfloat16, float16 or float32 (the same); out preferred_element_type or the
// inputs'; bias [G, N] in the output dtype. FP8 (delayed or current tensor scaling, a scale_inv
// per group and operand: Operand::kLhsScaleInv / kRhsScaleInv, or execute_scaled): lhs
// [M, K] with rhs [G, N, K] (ragged rows) or [N, K] (ragged contracting, sizes multiples of 16)
// only, K and the output rows on 16 bytes; block scaling (MXFP8, NVFP4) is refused.
// Group sizes: G int32 values per call, in backend memory (Operand::kGroupSizes: copied to the
// host once per call, which waits for the device) or host memory (Operand::kHostGroupSizes),
// checked before any GEMM is issued: none negative, summing to at most M or K_total (less:
// padding; out rows past the sum are zeros in the ragged-rows form). Path
// kCublasLtDeviceTiles reads sizes in backend memory there instead, with no copy to the host
// (so its calls can be captured into a CUDA graph and replayed with sizes that change): bad
// sizes then fill out with NaN and the message reaches the host later (check_device_sizes).
// Paths (CUDA backend; the CPU backend always loops): kLoop (one GEMM per group), kCublasGrouped
// (one cublasGemmGroupedBatchedEx), kCublasLtTiles (power-of-two row tiles, one pointer-array
// cuBLASLt matmul per tile size), kAuto (the tiles below kAutoTilesRowsPerGroup rows per group
// on average, else the loop), kCublasLtDeviceTiles (one pointer-array matmul of fixed shape,
// 128-row tiles, its pointers computed by a kernel from the sizes in device memory; ragged rows,
// lhs [M, K], unscaled; up to G 128 rows computed beyond M per call; never chosen by kAuto).
// A call whose pointers do not suit a path runs the loop (loop_fallbacks()); the device tiles
// cannot, and throw for pointers not on 16 bytes.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/captured_call.hpp"
#include "cgemm/runtime/grouped_task.hpp"
#include "cgemm/runtime/operands.hpp"
#include "cgemm/sharding/grouped_gemm.hpp"

namespace cgemm {

class Context;

// GroupedForm, GroupedPath and their names: grouped_task.hpp.

struct GroupedGemmDesc {
  std::string name = "grouped_gemm";  // names the plan in errors and trace labels
  GroupedForm form = GroupedForm::kRaggedRows;
  int64_t num_groups = 0;          // G, the length of every call's group sizes
  Shape lhs_shape;                 // gemm.py's lhs original_shape
  Shape rhs_shape;                 // rhs original_shape
  DType dtype = DType::kBFloat16;  // of lhs and rhs
  // gemm.py's contracting_dims, used as given (its default ((1,), (2,))).
  std::vector<int64_t> lhs_contracting_dims{1};
  std::vector<int64_t> rhs_contracting_dims{2};
  std::optional<Shape> bias_shape;              // nullopt: no bias; else [G, N]
  std::optional<DType> preferred_element_type;  // the output dtype; nullopt: dtype (FP8: bf16)
  GroupedPath path = GroupedPath::kAuto;        // CUDA backend only; the CPU backend loops
  // FP8 only (see the top of this file): the rhs data's format (nullopt: dtype) and the
  // scaling mode, delayed_tensor_scaling or current_tensor_scaling.
  std::optional<DType> rhs_dtype;
  ScalingMode scaling = ScalingMode::kNoScaling;
};

class GroupedGemmPlan {
 public:
  /// Plans `desc` through the planner's grouped_gemm (compute capability and stream count
  /// from `backend`; no v2 (nvte_grouped_gemm) library here, so NVTE_JAX_ENFORCE_V2_GROUPED_GEMM
  /// set to a non-zero integer fails the plan, as gemm.py fails without that library). Throws
  /// PlanError where gemm.py raises, cgemm::Error for what the runtime does
  /// not run (a layout other than those at the top of this file, FP8 or other dtypes, rhs's
  /// G dim != num_groups, lhs and rhs contracting sizes that differ, path kCublasGrouped or
  /// kCublasLtTiles on the CUDA backend where it does not run; kCublasLtDeviceTiles, on every
  /// backend, where the CUDA backend would not run it). Then it prepares its program:
  /// the engine's workspaces (the host copy of the sizes; FP8: a 16-byte slot per scale_inv)
  /// and, for kCublasGrouped or kCublasLtTiles (kAuto included, where it picks the tiles), the
  /// backend's cuBLAS or cuBLASLt handle and staging (pinned and device memory; the tiles also
  /// a 32 MiB workspace; the device tiles also (G + 1) x 128 x N scratch rows of the output
  /// dtype and their pointer arrays) on the current device. No call allocates any of them.
  GroupedGemmPlan(Backend& backend, GroupedGemmDesc desc);
  /// The same on ctx's backend (a grouped GEMM is local to a rank: no collective).
  GroupedGemmPlan(Context& ctx, GroupedGemmDesc desc);
  ~GroupedGemmPlan();
  GroupedGemmPlan(GroupedGemmPlan&&) noexcept;  // the engine and the backend's state move along
  GroupedGemmPlan(const GroupedGemmPlan&) = delete;
  GroupedGemmPlan& operator=(const GroupedGemmPlan&) = delete;

  const GroupedGemmDesc& desc() const { return desc_; }
  /// The planner's answer (out shape and dtype, layouts, boundaries, workspace sizes).
  const GroupedGemm& planned() const { return planned_; }
  const Shape& out_shape() const { return planned_.out_shape; }
  DType out_dtype() const { return planned_.out_dtype; }
  int64_t num_groups() const { return desc_.num_groups; }
  /// The path calls run: kLoop, kCublasGrouped, kCublasLtTiles or kCublasLtDeviceTiles (never
  /// kAuto; always kLoop on the CPU, where shape().device_sizes says whether sizes in backend
  /// memory are read in place).
  GroupedPath path() const { return shape_.path; }
  /// Calls of a kCublasGrouped or kCublasLtTiles plan that ran the loop instead (unaligned
  /// group pointers; for the tiles also a tile size without a cuBLASLt algorithm).
  int64_t loop_fallbacks() const;
  /// The dim the group sizes sum to at most: M (kRaggedRows) or K_total (kRaggedContracting).
  /// The plan is made for it: every workspace is sized from it.
  int64_t ragged_extent() const { return shape_.extent; }
  /// What every call of this plan runs (Backend::grouped_gemm's shape).
  const GroupedGemmShape& shape() const { return shape_; }
  /// FLOPs of one call with these sizes: 2 * m * n * k summed over the groups (the real,
  /// ragged work). Throws as check_group_sizes.
  double flops(std::span<const int32_t> group_sizes) const;

  /// "" when this plan's calls could be captured into a CUDA graph and replayed; else one line
  /// naming the first op of its program that cannot and why (runtime/src/program/program.hpp's
  /// capture_refusal): with sizes in backend memory, the op that copies them to the host.
  std::string capture_refusal(bool sizes_in_backend_memory = true) const;
  /// The call execute(x, stream) would make, captured for replays (captured_call.hpp), after
  /// execute's checks. Only a plan with path kCublasLtDeviceTiles given its sizes in backend
  /// memory (Operand::kGroupSizes) can be captured: each replay reads the sizes there as they
  /// are then (they may change between replays; their count and the capacity M may not).
  /// Every other call needs the host mid-call (its sizes copied to the host, or given there,
  /// and its groups' pointers computed there), so this throws cgemm::Error "grouped GEMM 'NAME'
  /// cannot be captured into a CUDA graph: " naming that op and what would make it
  /// capturable, before anything is recorded; execute inside the caller's capture refuses
  /// the same way.
  CapturedCall capture(const Operands& x, void* stream);

  /// Path kCublasLtDeviceTiles: waits for the backend's work, then throws cgemm::Error when a
  /// call or replay since the last report had bad sizes in device memory (its out was filled
  /// with NaN), naming how many and the last one's fault. Without it such an error reaches
  /// the host only at the first call or replay of the plan issued after the device ran the
  /// bad call (the host does not wait for it: calls issued before then still run), and one
  /// never reported is printed to stderr when the plan is destroyed. Other paths: nothing.
  void check_device_sizes();

  /// Throws cgemm::Error unless `group_sizes` has num_groups() values, none negative, summing
  /// to ragged_extent(). Returns the sum.
  int64_t check_group_sizes(std::span<const int32_t> group_sizes) const;

  /// The grouped GEMM on the slots of operands.hpp: lhs, rhs, out, bias (null iff the plan has
  /// none; backend memory with the desc's shapes), the G int32 sizes in kGroupSizes (backend
  /// memory) or kHostGroupSizes (host memory, G values: the caller guarantees the length),
  /// one of the two, and for an FP8 plan kLhsScaleInv and kRhsScaleInv (G float32 each,
  /// backend memory). Operands, and sizes in host memory, are checked before anything is
  /// issued (cgemm::Error naming what is wrong); sizes in backend memory once their copy to the
  /// host (the program's first op) has them, before any GEMM (the FP8 plan's own scale slots may
  /// have been written by then). Asynchronous on the CUDA backend, except that sizes in backend
  /// memory are copied to the host first (the host waits for the work queued before), except
  /// with path kCublasLtDeviceTiles.
  ///
  /// `stream`: the caller's stream, as GemmPlan::execute takes it (a cudaStream_t as void*):
  /// the call starts after the work queued on it and the work queued on it after the call
  /// sees the output, with events. Null: the backend's stream 0. The CPU backend ignores it.
  void execute(const Operands& x, void* stream = nullptr);
  /// The grouped GEMM with sizes in host memory (group_sizes.size() must be num_groups()).
  void execute(std::span<const int32_t> group_sizes, const void* lhs, const void* rhs,
               const void* bias, void* out) {
    execute(Operands(lhs, rhs, bias, out).set_input(Operand::kHostGroupSizes, sized(group_sizes)));
  }
  /// An FP8 plan's call (see the top of this file): lhs_scale_inv and rhs_scale_inv hold G
  /// float32 values each in backend memory. Throws cgemm::Error for a null scale_inv, and
  /// execute / execute_backend_sizes throw for an FP8 plan (and this for another plan).
  void execute_scaled(std::span<const int32_t> group_sizes, const void* lhs,
                      const float* lhs_scale_inv, const void* rhs, const float* rhs_scale_inv,
                      const void* bias, void* out) {
    execute(
        scaled(Operands(lhs, rhs, bias, out), sized(group_sizes), lhs_scale_inv, rhs_scale_inv));
  }
  /// The same with the G sizes in backend memory (one copy to the host per call; none with
  /// path kCublasLtDeviceTiles).
  void execute_backend_sizes(const int32_t* group_sizes, const void* lhs, const void* rhs,
                             const void* bias, void* out) {
    execute(Operands(lhs, rhs, bias, out).set_input(Operand::kGroupSizes, group_sizes));
  }

  /// Private state (runtime/src/grouped/grouped_plan.cpp): the programs and the engine.
  struct Impl;

 private:
  void choose_path(const std::string& what);  // sets shape_.path (or throws)
  void check_call(const Operands& x) const;
  // group_sizes.data(), after checking it holds num_groups() values.
  const int32_t* sized(std::span<const int32_t> group_sizes) const;
  static Operands scaled(Operands x, const int32_t* host_sizes, const float* lhs_scale_inv,
                         const float* rhs_scale_inv);

  Backend& be_;
  GroupedGemmDesc desc_;
  GroupedGemm planned_;
  GroupedGemmShape shape_;
  std::string device_tiles_refusal_;  // "" where path kCublasLtDeviceTiles would run the plan
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgemm
