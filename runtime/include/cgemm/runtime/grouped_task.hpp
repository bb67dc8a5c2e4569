#pragma once
// One grouped GEMM call as a backend runs it (Backend::grouped_gemm): G GEMMs, one dim ragged,
// the G group sizes given per call. GroupedGemmPlan (grouped_plan.hpp) plans it from gemm.py's
// descriptor and writes it as a program op (runtime/src/program/program.hpp: GroupedGemmOp); the
// CPU backend runs it as a loop of GEMMs, the CUDA backend as that loop or one of its two runners
// (cuBLAS grouped, cuBLASLt tiles), whose handles and staging it makes when the plan is
// prepared (Backend::prepare_grouped_gemm), never during a call.

#include <cstdint>
#include <span>
#include <string>

#include "cgemm/core/dtype.hpp"

namespace cgemm {

class Backend;

/// Which dim the group sizes split.
enum class GroupedForm {
  kRaggedRows,         // forward, dgrad: lhs (and out) rows
  kRaggedContracting,  // wgrad: the contracting dim; out gets a leading G
};

/// "ragged_rows" or "ragged_contracting".
const char* grouped_form_name(GroupedForm f);

/// How a call runs on the CUDA backend (grouped_plan.hpp's file comment).
/// kAuto's threshold: below this many rows per group on average, the cuBLASLt tiles.
inline constexpr int64_t kAutoTilesRowsPerGroup = 4096;

enum class GroupedPath {
  kAuto,           // by the groups' mean rows (see the file comment); the loop on the CPU
  kLoop,           // one cuBLASLt GEMM per non-empty group
  kCublasGrouped,  // one cublasGemmGroupedBatchedEx per call (ragged rows, bf16 / fp16)
  kCublasLtTiles,  // a pointer-array batched cuBLASLt matmul per tile size (ragged rows)
  /// One pointer-array cuBLASLt matmul of fixed shape whose pointers a kernel computes from the
  /// sizes in device memory (ragged rows): no host round trip, so it can be captured into a
  /// CUDA graph and replayed with sizes that change; computes up to G 128 rows beyond M.
  /// Never chosen by kAuto. On the CPU backend: the loop, reading the sizes where given.
  kCublasLtDeviceTiles,
};

/// "auto", "loop", "cublas_grouped", "cublaslt_tiles" or "cublaslt_device_tiles".
const char* grouped_path_name(GroupedPath p);

/// What stays fixed over a plan's calls (row-major, as GemmTask). kRaggedRows: lhs [extent, k]
/// (lhs_trans: [k, extent]), rhs [groups, k, n] (rhs_trans: [groups, n, k]), out [extent, n].
/// kRaggedContracting: lhs [m, extent] (lhs_trans: [extent, m]), rhs [extent, n] (rhs_trans:
/// [n, extent]), out [groups, m, n]. bias [groups, n] in out_dtype. `extent` is the ragged
/// dim's capacity: a call's sizes sum to at most it (less: padding, zero rows of out in the
/// ragged-rows form), so every workspace a path needs is sized from it when the plan is prepared.
struct GroupedGemmShape {
  GroupedForm form = GroupedForm::kRaggedRows;
  GroupedPath path = GroupedPath::kLoop;  // resolved at planning: never kAuto
  int64_t groups = 0;
  int64_t extent = 0;  // M (ragged rows) or K_total (ragged contracting)
  int64_t m = 0;       // kRaggedContracting only
  int64_t n = 0;
  int64_t k = 0;  // kRaggedRows only
  bool lhs_trans = false, rhs_trans = false;
  DType in_dtype = DType::kBFloat16;
  DType rhs_dtype = DType::kBFloat16;  // differs from in_dtype for FP8 mixes only
  DType out_dtype = DType::kBFloat16;
  bool bias = false;
  bool scaled = false;  // FP8: a scale_inv per group and operand
  /// FP8: cuBLASLt's fast accumulation (set at planning from
  /// NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION, as the dense GEMMs): every path alike.
  bool fast_accumulation = true;
  /// Sizes given in backend memory are read there, never copied to the host (path
  /// kCublasLtDeviceTiles; the CPU backend's loop reads them in place): a call's task may then
  /// have no host_sizes.
  bool device_sizes = false;

  bool operator==(const GroupedGemmShape&) const = default;
};

/// A backend's state for one GroupedGemmShape (Backend::prepare_grouped_gemm); 0: none.
using GroupedGemmHandle = int64_t;

/// One call. Pointers are backend memory except host_sizes.
struct GroupedGemmTask {
  GroupedGemmShape shape;
  GroupedGemmHandle handle = 0;  // from prepare_grouped_gemm for this shape
  const void* lhs = nullptr;
  const void* rhs = nullptr;
  const void* bias = nullptr;  // null iff !shape.bias
  void* out = nullptr;
  /// The G sizes in host memory, checked (check_group_sizes) before the task is issued: the
  /// loop and the runners compute every group's pointers from them on the host. Null when
  /// shape.device_sizes and the call gave them in backend memory only: the backend checks
  /// them where they are (the CUDA device tiles on the device: NaN out and an error at a
  /// later call, Backend::check_grouped_gemm; the CPU backend before it runs).
  const int32_t* host_sizes = nullptr;
  /// The same G sizes in backend memory when the call gave them there (null when it gave host
  /// sizes): what a device-side path would read without a copy to the host.
  const int32_t* sizes = nullptr;
  /// FP8: group g's scale_inv of each operand is one float at byte g * scale_stride.
  const float* lhs_scale_inv = nullptr;
  const float* rhs_scale_inv = nullptr;
  int64_t scale_stride = 0;
  const char* label = nullptr;  // the plan's name, in errors
  /// "NAME group g", one per group: the loop's GEMM labels in traces and timeout messages.
  std::span<const std::string> group_labels;
};

/// Throws cgemm::Error unless `sizes` has shape.groups values, none negative, summing to at
/// most shape.extent, naming the grouped GEMM `name`. Returns the sum.
int64_t check_group_sizes(const GroupedGemmShape& shape, const std::string& name,
                          std::span<const int32_t> sizes);

/// The ragged-rows form with sizes summing to `sum` < M: writes zeros to out rows [sum, M), the
/// padding of a capacity buffer (no group owns them); nothing otherwise. Every path runs its
/// groups first, then this (the engine, after the backend's call; the CPU backend where it
/// reads sizes from its own memory; the CUDA device tiles in their scatter kernel).
/// Defined with the loop (runtime/src/grouped/grouped_loop.cpp).
void zero_padding_rows(Backend& be, const GroupedGemmTask& t, int64_t sum, int stream);

}  // namespace cgemm
