#pragma once
// A grouped GEMM (the expert GEMMs of a mixture-of-experts layer) as Transformer Engine's JAX
// gemm.py `grouped_gemm` has it: G GEMMs in one call, one dim ragged, the G group sizes given
// per call. The descriptor goes through the sharding planner's grouped_gemm
// (cgemm/sharding/grouped_gemm.hpp), so every shape, dtype and bias rule and every error of
// gemm.py's Python side is the planner's; the runtime then runs the layouts below and refuses
// the others with one cgemm::Error naming the layout.
//
// The two forms (row-major shapes; M, N, K element counts; G = num_groups):
//  - kRaggedRows (forward and dgrad): the token rows M of lhs are split into G consecutive
//    groups. lhs [M, K] (contracting dims {1}) or [K, M] ({0}); rhs [G, K, N] ({1}) or
//    [G, N, K] ({2}: the "T" layout, gemm.py's default ((1,), (2,)); dgrad is this form with
//    the weight's transpose); out [M, N]. Group g owns rows [off_g, off_g + size_g) of lhs
//    and out: out[rows of g] = lhs[rows of g] @ rhs[g] (+ bias[g] on every row).
//    gemm.py carries the sizes in lhs first_dims ([M, K]) or last_dims ([K, M]); out_first_dims
//    (or out_last_dims) follow lhs, and out_shape = (*lhs_non_contracting, *rhs_non_contracting)
//    with rhs's dim 0 (G) skipped.
//  - kRaggedContracting (wgrad): the contracting dim K_total of both operands is split into G
//    groups. lhs [K, M] ({0}: x^T, as a weight gradient reads x) or [M, K] ({1}); rhs [K, N]
//    ({0}) or [N, K] ({1}); out [G, M, N]: with group g owning contracting indices
//    [off_g, off_g + size_g), out[g][i, j] = sum over p of those of lhs(i, p) * rhs(p, j)
//    (+ bias[g][j]), lhs(i, p) being lhs[p, i] ([K, M]) or lhs[i, p] ([M, K]) and rhs(p, j)
//    rhs[p, j] ([K, N]) or rhs[j, p] ([N, K]). A group of size 0 gives out[g] = 0 (+ bias[g]).
//    gemm.py carries the sizes in the operands' first_dims (the ragged dim first) or last_dims
//    (last); the rhs's ragged dims make the output uniform with a leading G: out_shape =
//    (num_gemms, *lhs_non_contracting, *rhs_non_contracting).
// Empty groups and one group holding every row are allowed in both forms.
//
// Dtypes: lhs and rhs bfloat16, float16 or float32 (the same); the output is
// preferred_element_type when given, else the inputs' dtype (gemm.py), one of the same three.
// The bias is [G, N] in the output dtype (gemm.py asserts its shape (num_gemms, N) and never
// reads its dtype).
//
// FP8 (tensor scaling, gemm.py's GroupedScaledTensor1x operands with a scale_inv per group):
// dtype (lhs) and rhs_dtype float8_e4m3 or float8_e5m2 (not both e5m2), scaling
// delayed_tensor_scaling or current_tensor_scaling (the GEMM is the same for both), and the
// ragged-rows form with lhs [M, K] and rhs [G, N, K] only: gemm.py below compute capability 100
// takes scaled grouped operands only as lhs "N" / rhs "T" data, and cuBLASLt's FP8 GEMMs on
// Hopper need K-major operands. The output is preferred_element_type, else bfloat16 (the
// operands' dq_dtype here). Calls go through execute_scaled with lhs_scale_inv and
// rhs_scale_inv, G float32 each in backend memory (group g's rows of lhs were quantized with
// scale 1 / lhs_scale_inv[g], rhs[g] with 1 / rhs_scale_inv[g]): out rows of g = lhs_scale_inv[g]
// * rhs_scale_inv[g] * (lhs rows of g @ rhs[g]) (+ bias[g]), accumulated in fp32. They run the
// loop (one FP8 cuBLASLt GEMM per group on the CUDA backend, whose FP8 rules apply: K a
// multiple of 16). Each call first copies the 2G scale_inv values to 16-byte slots of the plan
// (2G copies of 4 bytes on stream 0): cuBLASLt reads a scale through a pointer of its own and
// refuses one that is not 16-byte aligned, as group g's is at 4g bytes of a [G] array. Block
// scaling (MXFP8, NVFP4) is refused with one message.

// Sources (Transformer Engine's gemm.py, ../shared/seed/000_61943f8e0dd4a4f6.txt): the output's
// ragged dims from the operand carrying sizes (lines 2165-2177), lhs_is_trans / rhs_is_trans
// (2183-2188), num_gemms (2282-2294), the non-contracting dims and out_shape, G first for
// wgrad (2303-2320), the bias shape (2322-2327), the lengths of the size arrays (1399-1426).
//
// Group sizes are int32 (gemm.py's (G,) int32 arrays), per call, from host memory or from
// backend memory (device memory on the CUDA backend: copied to the host once per call, G
// values in one copy; that copy waits for the work issued before it). They are checked before
// any GEMM is issued: G values, none negative, summing to the ragged dim (M, or K_total);
// else cgemm::Error naming the plan, the group, the sum and the dim. (gemm.py checks only the
// arrays' lengths; its abstract notes that K totals may leave padding. The issue asks the
// sum to match, so a padded K is refused here.)
//
// Execution paths (GroupedGemmDesc::path; GroupedGemmPlan::path() says which one calls run):
//  - kLoop: one Backend::gemm per non-empty group (GemmTask with the group's offsets into
//    lhs, rhs, out and bias), in group order on stream 0; no synchronization between groups
//    (asynchronous on the CUDA backend: a loop of cuBLASLt GEMMs on stream 0). A group whose
//    contraction is empty (size 0 in kRaggedContracting, or K = 0) writes 0 (+ bias) with one
//    Backend::sum_partials over no parts, since cuBLASLt refuses k = 0.
//  - kCublasGrouped (CUDA backend, kRaggedRows, bfloat16 or float16 in and out, K > 0, M, N,
//    K within int32): one cublasGemmGroupedBatchedEx per call on stream 0, one cuBLAS group
//    of one problem per non-empty group (fp32 accumulation, CUBLAS_COMPUTE_32F). Per call:
//    the problems' A/B/C pointers and the G row ends go to the device in one asynchronous copy
//    from pinned staging the plan owns (a ring of slots, each reused only after an event says
//    its previous copy has left it); no host synchronization per group. With a bias, one
//    kernel first writes bias[g] into every row of group g and the GEMM adds into it
//    (beta = 1): the bias is added in fp32 and rounded once, as cuBLASLt's bias epilogue.
//    The path records no trace spans. A plan whose desc asks for it where it does not run
//    (fp32, an output dtype other than the inputs', kRaggedContracting, K = 0, a dim over
//    int32) is refused with cgemm::Error naming the reason. One exception is per call: a call
//    whose group pointers or leading dims are not 16-byte aligned (an lhs [K, M] group at an
//    odd row offset, K * 2 bytes not a multiple of 16) runs the loop, since cuBLAS's grouped
//    kernels fault on it (cudaErrorMisalignedAddress on the H200, which loses the context).
//  - kCublasLtTiles (CUDA backend, kRaggedRows, bfloat16, float16 or float32 in and out, K > 0,
//    M, N, K within int32; runtime/src/grouped/cublaslt_tiles.cpp): every group is cut into
//    power-of-two row tiles that never leave it (at most 256 or 128 rows, chosen per call), and
//    each tile size is one cuBLASLt matmul in pointer-array batch mode on stream 0: one matmul
//    for equal groups, a few for skewed ones. Per call the pointer arrays go to the device in
//    one asynchronous copy from pinned staging, as kCublasGrouped's. Without a bias a group's
//    last tile may overlap the one before (its shared rows computed twice by one matmul from
//    the same inputs, beta = 0, no in-place split-K; on the H200 every row agreed bit for bit
//    with the loop's). With a bias (cuBLASLt has no bias epilogue in pointer-array mode) a
//    kernel first writes each row's group bias into out and the matmuls add into it (beta = 1,
//    added in fp32 and rounded once, as the loop), the tiles then without overlap. The path
//    records no trace spans. A call whose tiles do not all start on 16 bytes (lhs [K, M] with
//    tiles at odd rows, leading dims not a multiple of 16 bytes), or for whose tile sizes
//    cuBLASLt has no pointer-array algorithm, runs the loop, counted by loop_fallbacks(); a plan
//    asking for the path where it does not run is refused as above.
//  - kAuto (CUDA backend): kCublasLtTiles where it runs and the groups average fewer than
//    kAutoTilesRowsPerGroup rows (M < 4096 G), else kLoop: groups that large are dense GEMMs
//    already. kCublasGrouped is not chosen by kAuto. Measured on the H200 (docs/PERFORMANCE.md,
//    the grouped GEMM table): the tiles against the loop at 64 groups of 256 and of 1024 rows.
// The CPU backend ignores the path: it always runs the loop.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/runtime/backend.hpp"
#include "cgemm/sharding/grouped_gemm.hpp"

namespace cgemm {

class Context;

/// Which dim the group sizes split (see the top of this file).
enum class GroupedForm {
  kRaggedRows,         // forward, dgrad: lhs (and out) rows
  kRaggedContracting,  // wgrad: the contracting dim; out gets a leading G
};

/// "ragged_rows" or "ragged_contracting".
const char* grouped_form_name(GroupedForm f);

/// How a call runs on the CUDA backend (see the top of this file).
/// kAuto's threshold: below this many rows per group on average, the cuBLASLt tiles.
inline constexpr int64_t kAutoTilesRowsPerGroup = 4096;

enum class GroupedPath {
  kAuto,           // by the groups' mean rows (see the file comment); the loop on the CPU
  kLoop,           // one cuBLASLt GEMM per non-empty group
  kCublasGrouped,  // one cublasGemmGroupedBatchedEx per call (ragged rows, bf16 / fp16)
  kCublasLtTiles,  // a pointer-array batched cuBLASLt matmul per tile size (ragged rows)
};

/// "auto", "loop", "cublas_grouped" or "cublaslt_tiles".
const char* grouped_path_name(GroupedPath p);

namespace grouped {
class RaggedRowsRunner;  // runtime/src/grouped/ragged_rows_runner.hpp

/// Gives a plan's backend memory back to its backend.
struct ReleaseToBackend {
  Backend* be = nullptr;
  void operator()(void* p) const noexcept {
    if (p != nullptr) be->release(p);
  }
};
}  // namespace grouped

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
  /// from `backend`; no v2 (nvte_grouped_gemm) library here, NVTE_JAX_ENFORCE_V2_GROUPED_GEMM
  /// not read). Throws PlanError where gemm.py raises, cgemm::Error for what the runtime does
  /// not run (a layout other than those at the top of this file, FP8 or other dtypes, rhs's
  /// G dim != num_groups, lhs and rhs contracting sizes that differ, path kCublasGrouped or
  /// kCublasLtTiles on the CUDA backend where it does not run). With either (kAuto included,
  /// where it picks the tiles) it creates a cuBLAS or cuBLASLt handle and its staging (pinned
  /// and device memory; the tiles also a 32 MiB workspace) on the current device.
  GroupedGemmPlan(Backend& backend, GroupedGemmDesc desc);
  /// The same on ctx's backend (a grouped GEMM is local to a rank: no collective).
  GroupedGemmPlan(Context& ctx, GroupedGemmDesc desc);
  ~GroupedGemmPlan();
  GroupedGemmPlan(GroupedGemmPlan&&) noexcept;  // a CUDA runner's handle moves along
  GroupedGemmPlan(const GroupedGemmPlan&) = delete;
  GroupedGemmPlan& operator=(const GroupedGemmPlan&) = delete;

  const GroupedGemmDesc& desc() const { return desc_; }
  /// The planner's answer (out shape and dtype, layouts, boundaries, workspace sizes).
  const GroupedGemm& planned() const { return planned_; }
  const Shape& out_shape() const { return planned_.out_shape; }
  DType out_dtype() const { return planned_.out_dtype; }
  int64_t num_groups() const { return desc_.num_groups; }
  /// The path calls run: kLoop, kCublasGrouped or kCublasLtTiles (never kAuto; always kLoop
  /// on the CPU).
  GroupedPath path() const { return path_; }
  /// Calls of a kCublasGrouped or kCublasLtTiles plan that ran the loop instead (unaligned
  /// group pointers; for the tiles also a tile size without a cuBLASLt algorithm).
  int64_t loop_fallbacks() const { return loop_fallbacks_; }
  /// The dim the group sizes must sum to: M (kRaggedRows) or K_total (kRaggedContracting).
  int64_t ragged_extent() const { return ragged_; }
  /// FLOPs of one call with these sizes: 2 * m * n * k summed over the groups (the real,
  /// ragged work). Throws as check_group_sizes.
  double flops(std::span<const int32_t> group_sizes) const;

  /// Throws cgemm::Error unless `group_sizes` has num_groups() values, none negative, summing
  /// to ragged_extent(). Returns the sum.
  int64_t check_group_sizes(std::span<const int32_t> group_sizes) const;

  /// The grouped GEMM with sizes in host memory. lhs, rhs, bias and out are backend memory
  /// with the desc's shapes (bias null iff the plan has none). Sizes and pointers are checked
  /// before anything is issued. Asynchronous on the CUDA backend (stream 0).
  void execute(std::span<const int32_t> group_sizes, const void* lhs, const void* rhs,
               const void* bias, void* out);
  /// An FP8 plan's call (see the top of this file): lhs_scale_inv and rhs_scale_inv hold G
  /// float32 values each in backend memory. Throws cgemm::Error for a null scale_inv, and
  /// execute / execute_backend_sizes throw for an FP8 plan (and this for another plan).
  void execute_scaled(std::span<const int32_t> group_sizes, const void* lhs,
                      const float* lhs_scale_inv, const void* rhs, const float* rhs_scale_inv,
                      const void* bias, void* out);
  /// The same with the G sizes in backend memory (one copy to the host per call).
  void execute_backend_sizes(const int32_t* group_sizes, const void* lhs, const void* rhs,
                             const void* bias, void* out);

 private:
  void choose_path(const std::string& what);  // sets path_ and runner_ (or throws)
  void check_operands(const void* lhs, const void* rhs, const void* bias, void* out) const;
  void run(std::span<const int32_t> group_sizes, const void* lhs, const float* lhs_scale_inv,
           const void* rhs, const float* rhs_scale_inv, const void* bias, void* out);

  Backend& be_;
  GroupedGemmDesc desc_;
  GroupedGemm planned_;
  int64_t ragged_ = 0;                          // M or K_total
  int64_t m_ = 0, n_ = 0, k_ = 0;               // M (kRaggedContracting) / N / K (kRaggedRows)
  bool lhs_trans_ = false, rhs_trans_ = false;  // as GemmTask: lhs [k, m], rhs [n, k]
  std::vector<std::string> labels_;             // one per group, for traces
  std::vector<int32_t> host_sizes_;             // the staging copy of backend sizes
  GroupedPath path_ = GroupedPath::kLoop;
  int64_t loop_fallbacks_ = 0;
  std::unique_ptr<grouped::RaggedRowsRunner> runner_;  // kCublasGrouped, kCublasLtTiles
  // FP8: a 16-byte slot per group and operand, lhs's G then rhs's G (backend memory), into
  // which each call spreads its scale_inv arrays (see run()).
  std::unique_ptr<void, grouped::ReleaseToBackend> scale_slots_;
};

}  // namespace cgemm
