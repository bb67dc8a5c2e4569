#pragma once
// A grouped GEMM call as a loop of Backend::gemm, one per non-empty group, in group order: the
// CPU backend's way to run every call, and the CUDA backend's path kLoop and the fallback of its
// runners. Lives in grouped/, below both backends' folders (cpu/, cuda/), since both run it.

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/grouped_task.hpp"

namespace cgemm {

/// Issues `t` on `stream` through be.gemm (and be.sum_partials for an empty contraction, where
/// only the bias is written). t.host_sizes must have passed check_group_sizes.
void run_grouped_loop(Backend& be, const GroupedGemmTask& t, int stream);

}  // namespace cgemm
