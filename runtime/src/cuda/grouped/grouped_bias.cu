#include <cuda_runtime.h>

#include "grouped_bias.hpp"

namespace cgemm::grouped {
namespace {

// One block per row (grid-stride over rows): the block finds its row's group once (a binary
// search in the G row ends, the same loads for every thread), then copies that group's bias
// row. The bias bits are copied as they are: out and bias have one dtype.
template <typename T>
__global__ void fill_group_bias_kernel(T* out, const T* bias, const int64_t* row_ends,
                                       int64_t groups, int64_t m_total, int64_t n) {
  for (int64_t r = blockIdx.x; r < m_total; r += gridDim.x) {
    int64_t lo = 0, hi = groups - 1;  // the first g with row_ends[g] > r; the last one has
    while (lo < hi) {                 // row_ends = m_total > r
      const int64_t mid = (lo + hi) / 2;
      if (row_ends[mid] > r) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    const T* b = bias + lo * n;
    T* o = out + r * n;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) o[j] = b[j];
  }
}

}  // namespace

cudaError_t launch_fill_group_bias(void* out, const void* bias, const int64_t* row_ends,
                                   int64_t groups, int64_t m_total, int64_t n, DType dtype,
                                   cudaStream_t stream) {
  if (m_total <= 0 || n <= 0) return cudaSuccess;
  const size_t bytes = dtype_size(dtype);
  if (groups <= 0 ||
      (dtype != DType::kBFloat16 && dtype != DType::kFloat16 && dtype != DType::kFloat32)) {
    return cudaErrorInvalidValue;
  }
  // So that cudaGetLastError below names this launch, not an earlier handled failure.
  static_cast<void>(cudaGetLastError());
  constexpr int kThreads = 256;
  const unsigned blocks = static_cast<unsigned>(m_total < 65536 ? m_total : 65536);
  if (bytes == 2) {
    fill_group_bias_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(out),
                                                            static_cast<const uint16_t*>(bias),
                                                            row_ends, groups, m_total, n);
  } else {
    fill_group_bias_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(out),
                                                            static_cast<const uint32_t*>(bias),
                                                            row_ends, groups, m_total, n);
  }
  return cudaGetLastError();
}

}  // namespace cgemm::grouped
