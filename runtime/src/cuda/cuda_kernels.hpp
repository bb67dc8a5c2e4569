#pragma once
// The CUDA backend's own kernels (private to runtime/). Each launcher validates nothing beyond
// what it needs to launch (the backend checks the arguments first) and returns the launch's
// cudaError_t, so the caller can name its rank and sizes in the error.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"
#include "cgemm/sharding/reorder.hpp"

namespace cgemm::cuda {

constexpr int kMaxFillDims = 6;
constexpr int kMaxParts = 64;

/// dst (row-major `local`, bf16/fp16/fp32) = numeric::normal_value(seed, flat index in
/// `global` of offset + i, std), the CPU backend's values. local.size() <= kMaxFillDims.
cudaError_t launch_fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                               const Shape& offset, uint64_t seed, float std, cudaStream_t stream);

/// `count` elements of `element_bytes` (1, 2 or 4) set to `pattern` (a NaN's bits).
cudaError_t launch_fill_pattern(void* dst, size_t element_bytes, uint32_t pattern, int64_t count,
                                cudaStream_t stream);

/// Moves `blocks` blocks of `block_bytes`: output block b comes from source block
/// source_block(kind, b), where the tensor is [outer, tpsp] blocks (tpsp-leading) or
/// [tpsp, outer] blocks (dp-leading) of m rows each; see cuda_kernels.cu.
cudaError_t launch_reorder(ReorderKind kind, int64_t outer, int64_t tpsp, size_t block_bytes,
                           const void* src, void* dst, cudaStream_t stream);

/// out[i] = cast(sum_p parts[p][i] in order, in fp32, + bias[i % bias_len]); bias (out_dtype)
/// may be null. num_parts <= kMaxParts. out may be one of the parts (in place). (A pointer and a
/// count, not std::span: this header is also compiled by nvcc, which may not be in C++20 mode.)
cudaError_t launch_sum_partials(const void* const* parts, int num_parts, DType part_dtype,
                                int64_t count, const void* bias, int64_t bias_len, void* out,
                                DType out_dtype, cudaStream_t stream);

/// out[i] = fmaxf over p of parts[p][i] (NaNs skipped), i < count; 1 to kMaxParts float parts.
/// `out` may be one of the parts.
cudaError_t launch_max_partials(const float* const* parts, int num_parts, int64_t count, float* out,
                                cudaStream_t stream);

/// One thread that busy-waits `nanoseconds` of the GPU's global timer: queued ahead of a
/// timed region, the work behind it is enqueued before the GPU reaches it, so the timing sees
/// the GPU's time, not the host's launch latency or an idle GPU's clock ramp.
cudaError_t launch_spin(uint64_t nanoseconds, cudaStream_t stream);

}  // namespace cgemm::cuda
