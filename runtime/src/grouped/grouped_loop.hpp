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

/// The ragged-rows form with sizes summing to `sum` < M: writes zeros to out rows [sum, M), the
/// padding of a capacity buffer (no group owns them); nothing otherwise. Every path runs its
/// groups first, then this (the engine, after the backend's call; the CPU backend where it
/// reads sizes from its own memory; the CUDA device tiles in their scatter kernel).
void zero_padding_rows(Backend& be, const GroupedGemmTask& t, int64_t sum, int stream);

}  // namespace cgemm
