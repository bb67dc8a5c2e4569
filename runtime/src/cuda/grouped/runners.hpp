#pragma once
// The CUDA backend's grouped GEMM runners, one per prepared plan shape
// (Backend::prepare_grouped_gemm): made with their cuBLAS or cuBLASLt handle, staging and
// workspace when a plan is prepared, found by handle on every call, and given back with the
// plan. The loop (path kLoop, and the fallback of a call a runner declines) is the backend's
// own GEMMs (runtime/src/grouped/grouped_loop.hpp).

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>

#include "cgemm/runtime/grouped_task.hpp"
#include "ragged_rows_runner.hpp"

namespace cgemm::cuda {

class GroupedRunners {
 public:
  explicit GroupedRunners(std::string where) : where_(std::move(where)) {}

  /// 0 for path kLoop (nothing to make); else the runner of shape.path, made now on the
  /// current device. Throws cgemm::Error naming the plan where the path does not run `shape`.
  GroupedGemmHandle prepare(const GroupedGemmShape& shape, const std::string& name);
  void release(GroupedGemmHandle handle) noexcept;
  /// Runs `t` on its runner on `stream`. False, having issued nothing, when the runner declines
  /// this call's pointers (the caller runs the loop). Throws for a handle not prepared.
  bool run(const GroupedGemmTask& t, cudaStream_t stream);
  /// Throws the error an earlier call of `handle` found on the device (bad sizes in device
  /// memory), once. 0: nothing to check.
  void check(GroupedGemmHandle handle);

 private:
  grouped::RaggedRowsRunner& at(GroupedGemmHandle handle, const char* label);

  std::string where_;
  std::map<GroupedGemmHandle, std::unique_ptr<grouped::RaggedRowsRunner>> runners_;
  GroupedGemmHandle next_ = 1;
};

}  // namespace cgemm::cuda
