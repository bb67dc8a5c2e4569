#pragma once
// The CUDA backend's quantization kernels (private to runtime/): the amax reduction, the scale
// update and the per-tensor FP8 casts, plain and transposed. As cuda_kernels.hpp, each launcher
// checks only what it needs to launch (Compute checks the arguments first) and returns the
// launch's cudaError_t. C++17 (nvcc compiles this header).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cgemm/core/dtype.hpp"
#include "cgemm/gemm/quantize_task.hpp"

namespace cgemm::cuda {

/// *amax = max |src[i]| over `count` elements of `dtype` (float32, bfloat16, float16), NaNs
/// skipped (fmaxf); 0 when count is 0. Zeroes *amax on `stream` first, then one grid-stride
/// kernel max-reduces into it (an atomicMax on the float's bits: every value is >= 0, and the
/// integer order of non-negative floats' bits is their order).
cudaError_t launch_amax(const void* src, DType dtype, int64_t count, float* amax,
                        cudaStream_t stream);

/// One thread runs numeric::update_current_scale or numeric::update_delayed_scale on u.state
/// with *u.amax: the CPU backend's function, so the scales agree bit for bit (delayed scaling:
/// on a copy of the state in shared memory, loaded and stored by one block).
cudaError_t launch_update_scale(const ScaleUpdate& u, cudaStream_t stream);

/// Per-tensor FP8: dst = cast(src * state[ScaleStateLayout::kScale]) to `format`
/// (kFloat8E4M3 or kFloat8E5M2), round to nearest even, saturating to +-max (inf too), any NaN
/// to 0x7f (the hardware's cvt.rn.satfinite, which is numeric::float_to_e4m3 / _e5m2 of
/// cgemm/core/float8.hpp bit for bit). src is [rows, cols] row-major of src_dtype (float32,
/// bfloat16, float16); dst is [rows, cols], or [cols, rows] when `transpose`. amax (null: none;
/// not for FP8 codes): *amax = max |src| (NaNs skipped), as launch_amax gives it, measured by the
/// cast itself (QuantizeTask::amax).
cudaError_t launch_quantize_tensor(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                                   void* dst, DType format, bool transpose, const float* state,
                                   float* amax, cudaStream_t stream);

}  // namespace cgemm::cuda
