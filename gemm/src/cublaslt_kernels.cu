#include <cuda_runtime.h>

#include "cgemm/core/convert.hpp"
#include "cublaslt_kernels.hpp"

namespace cgemm::detail {
namespace {

template <int kKind>  // 0 = fp32, 1 = bf16, 2 = fp16
__global__ void add_bias_kernel(void* out, const void* bias, int64_t batch, int64_t m, int64_t n,
                                int64_t ldc, int64_t batch_stride) {
  const int64_t total = batch * m * n;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx % n;
    const int64_t row = idx / n;  // b * m + i
    const int64_t i = row % m;
    const int64_t b = row / m;
    const int64_t at = b * batch_stride + i * ldc + j;
    if constexpr (kKind == 0) {
      float* o = static_cast<float*>(out);
      o[at] = o[at] + static_cast<const float*>(bias)[j];
    } else if constexpr (kKind == 1) {
      uint16_t* o = static_cast<uint16_t*>(out);
      const float v = numeric::bf16_to_float(o[at]) +
                      numeric::bf16_to_float(static_cast<const uint16_t*>(bias)[j]);
      o[at] = numeric::float_to_bf16(v);
    } else {
      uint16_t* o = static_cast<uint16_t*>(out);
      const float v = numeric::fp16_to_float(o[at]) +
                      numeric::fp16_to_float(static_cast<const uint16_t*>(bias)[j]);
      o[at] = numeric::float_to_fp16(v);
    }
  }
}

}  // namespace

cudaError_t launch_add_bias(void* out, const void* bias, DType dtype, int64_t batch, int64_t m,
                            int64_t n, int64_t ldc, int64_t batch_stride, cudaStream_t stream) {
  const int64_t total = batch * m * n;
  if (total <= 0) return cudaSuccess;
  // So that cudaGetLastError below names this launch, not an earlier handled failure.
  static_cast<void>(cudaGetLastError());
  constexpr int kThreads = 256;
  const int64_t want = (total + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
  switch (dtype) {
    case DType::kFloat32:
      add_bias_kernel<0>
          <<<blocks, kThreads, 0, stream>>>(out, bias, batch, m, n, ldc, batch_stride);
      break;
    case DType::kBFloat16:
      add_bias_kernel<1>
          <<<blocks, kThreads, 0, stream>>>(out, bias, batch, m, n, ldc, batch_stride);
      break;
    case DType::kFloat16:
      add_bias_kernel<2>
          <<<blocks, kThreads, 0, stream>>>(out, bias, batch, m, n, ldc, batch_stride);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace cgemm::detail
