#pragma once
// The CPU implementation of a GemmTask: operands converted to fp64 and multiplied with CBLAS
// dgemm (OpenBLAS); the result is rounded to fp32, the bias added, then stored in the output
// dtype. fp64 makes a row's result independent of how rows are split into calls, so the
// chunked schedule and the one-call reference agree (the CPU backend is the reference).

#include <cstdint>

#include "cgemm/core/error.hpp"
#include "cgemm/gemm/gemm_task.hpp"

namespace cgemm {

/// Runs `task` on the calling thread. Throws cgemm::Error for inconsistent sizes/strides.
void cpu_gemm(const GemmTask& task);

/// Limits the BLAS library to `threads` threads (one rank per core on CPU jobs).
void set_blas_threads(int threads);

}  // namespace cgemm
