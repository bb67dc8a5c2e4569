#pragma once
// The CUDA backend's two ways to run a grouped GEMM's ragged-rows form besides the loop, behind
// one small interface: cuBLAS grouped (cublas_grouped.cpp), cuBLASLt tiles (cublaslt_tiles.cpp)
// and cuBLASLt device tiles (cublaslt_device_tiles.cpp). A runner is made when a plan is prepared
// (Backend:: prepare_grouped_gemm: its handle, staging and workspace, for the plan's capacity), and
// gets calls whose sizes the engine has checked. Private to the CUDA backend.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "grouped/grouped_rows.hpp"

namespace cgemm::grouped {

/// FP8: group g's scale_inv of lhs and of rhs, one float each at byte g * stride of its base
/// (device memory); all null for unscaled plans.
struct GroupScales {
  const float* lhs = nullptr;
  const float* rhs = nullptr;
  int64_t stride = 0;
};

class RaggedRowsRunner {
 public:
  virtual ~RaggedRowsRunner() = default;
  /// out rows of group g = lhs rows of g @ rhs[g] (+ bias[g]) for every g, FP8 products times
  /// the group's two scale_inv (`scales`, taken by the tiles runner only). `host_sizes`
  /// holds the G sizes, none negative, summing to at most M (checked by the caller; the rows
  /// past the sum are the caller's to zero, grouped_loop.hpp); it is empty when
  /// the call gave them only in device memory (`device_sizes`, G int32, else null), which
  /// only the device tiles runner takes. Asynchronous on `stream`. Returns false, having
  /// issued nothing, when this call's group pointers do not suit the runner (the caller then
  /// runs the loop); true when it issued the call.
  virtual bool run(std::span<const int32_t> host_sizes, const int32_t* device_sizes,
                   const void* lhs, const void* rhs, const void* bias, void* out,
                   const GroupScales& scales, cudaStream_t stream) = 0;
  /// An error an earlier call found on the device (bad sizes in device memory), once; "" when
  /// none. Only the device tiles runner has such errors.
  virtual std::string take_error() { return ""; }
};

/// The cuBLASLt tiles runner, with its handle, workspace and staging made now on the current
/// device; `with_bias`: its calls get a bias (tiles without overlap, the bias written into the
/// output first). Throws cgemm::Error where `g` is refused or memory is short.
std::unique_ptr<RaggedRowsRunner> make_cublaslt_tiles(const RaggedRowsGeometry& g, bool with_bias,
                                                      const std::string& name);

/// The cuBLASLt device tiles runner: one pointer-array matmul of fixed shape whose pointers a
/// kernel computes from the sizes in device memory (capturable). Its handle, algorithm,
/// pointer arrays and scratch tiles are made now. Throws cgemm::Error where `g` is refused or
/// cuBLASLt has no algorithm.
std::unique_ptr<RaggedRowsRunner> make_cublaslt_device_tiles(const RaggedRowsGeometry& g,
                                                             const std::string& name);

/// The cublasGemmGroupedBatchedEx runner, with its handle and staging made now on the current
/// device. `name` names the plan in errors. Throws cgemm::Error where `g` is refused.
std::unique_ptr<RaggedRowsRunner> make_cublas_grouped(const RaggedRowsGeometry& g,
                                                      const std::string& name);

}  // namespace cgemm::grouped
