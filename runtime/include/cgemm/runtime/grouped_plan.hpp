#pragma once
// A grouped GEMM (the expert GEMMs of a mixture-of-experts layer) as Transformer Engine's JAX
// gemm.py `grouped_gemm` has it: G GEMMs in one call, one dim ragged, the G group sizes given
// per call. The descriptor goes through the sharding planner's grouped_gemm
// (cgemm/sharding/grouped_gemm.hpp), so every shape, dtype and bias rule and every error of
// gemm.py's Python side is the planner's; the runtime runs the layouts below and refuses the
// others with one cgemm::Error naming the layout. docs/GROUPED_GEMM.md has the whole story: the
// layouts in detail, the FP8 rules and why, gemm.py's lines, the CUDA paths and their timings.
//
// Forms (row-major; G = num_groups): kRaggedRows (forward, dgrad): lhs [M, K] or [K, M], rhs
// [G, K, N] or [G, N, K], out [M, N], group g owns rows [off_g, off_g + size_g) of lhs and out.
// kRaggedContracting (wgrad): lhs [K, M] or [M, K], rhs [K, N] or [N, K], out [G, M, N], group
// g owns contracting indices [off_g, off_g + size_g). Empty groups are allowed in both.
// Dtypes: lhs and rhs bfloat16, float16 or float32 (the same); out preferred_element_type or the
// inputs'; bias [G, N] in the output dtype. FP8 (delayed or current tensor scaling, a scale_inv
// per group and operand, through execute_scaled): the ragged-rows form with lhs [M, K] and rhs
// [G, N, K] only; block scaling (MXFP8, NVFP4) is refused.
// Group sizes: G int32 values per call, from host or backend memory (then copied to the host
// once per call), checked before any GEMM is issued: none negative, summing to M or K_total.
// Paths (CUDA backend; the CPU backend always loops): kLoop (one GEMM per group on stream 0),
// kCublasGrouped (one cublasGemmGroupedBatchedEx), kCublasLtTiles (power-of-two row tiles, one
// pointer-array cuBLASLt matmul per tile size), kAuto (the tiles below kAutoTilesRowsPerGroup
// rows per group on average, else the loop). A call whose pointers do not suit a path runs the
// loop (loop_fallbacks()).

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
