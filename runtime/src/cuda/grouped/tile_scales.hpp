#pragma once
// The FP8 scales of the cuBLASLt tiles runner (cublaslt_tiles.cpp). One pointer-array matmul
// computes tiles of several groups, and each FP8 group has its own lhs and rhs scale_inv, but
// cuBLASLt's A and B scale pointers are one scalar per matmul. What carries a scale per tile is
// the alpha vector (CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST, one alpha per output
// column, CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE = N): tile i's N alphas are its group's
// lhs_scale_inv * rhs_scale_inv, written by this kernel on the call's stream (the scale_invs
// live on the device: delayed scaling updates them there). Probe and timings:
// docs/data/2026-12-07-fp8-kernels/fp8_tiles_probe.cu. Private to the CUDA backend; compiled
// by nvcc too (C++17).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cgemm::grouped {

/// alpha[i * n + j] = lhs_scale_inv[g] * rhs_scale_inv[g] for i < tiles, j < n, where
/// g = tile_groups[i] (device memory, each in [0, G)) and group g's scale_inv of each operand
/// is the float at byte g * scale_stride of its base. Returns the launch's error.
cudaError_t launch_fill_tile_alpha(float* alpha, const int32_t* tile_groups, int64_t tiles,
                                   int64_t n, const float* lhs_scale_inv,
                                   const float* rhs_scale_inv, int64_t scale_stride,
                                   cudaStream_t stream);

}  // namespace cgemm::grouped
