#pragma once
// The CPU implementation of a GemmTask: operands converted to fp32 and multiplied with
// CBLAS sgemm (OpenBLAS), so bf16/fp16 inputs get fp32 accumulation as on the GPU.

#include <cstdint>

#include "cgemm/gemm/gemm_task.hpp"

namespace cgemm {

/// Runs `task` on the calling thread. Throws cgemm::Error for inconsistent sizes/strides.
void cpu_gemm(const GemmTask& task);

/// Limits the BLAS library to `threads` threads (one rank per core on CPU jobs).
void set_blas_threads(int threads);

/// Converts `count` elements between dtypes on the host (float32/bfloat16/float16).
void convert_to_float(const void* src, DType dtype, float* dst, int64_t count);
void convert_from_float(const float* src, void* dst, DType dtype, int64_t count);

}  // namespace cgemm
