// The CUDA backend's training kernels (train_kernels.hpp): grid-stride loops over kW elements
// per step, kW = kVec (16-byte accesses) when every buffer is 16-byte aligned and n a
// multiple of kVec, else 1; the formulas are elementwise_math.hpp's, in float.

#include <type_traits>

#include "elementwise_math.hpp"
#include "kernel_common.cuh"
#include "train_kernels.hpp"

namespace cgemm::cuda {
namespace {

template <int kKind, int kW>
__device__ __forceinline__ void ld(const void* p, int64_t u, float (&x)[kW]) {
  if constexpr (kW == 1) {
    x[0] = load<kKind>(p, u);
  } else {
    load_vec<kKind>(p, u, x);
  }
}
template <int kKind, int kW>
__device__ __forceinline__ void st(void* p, int64_t u, const float (&x)[kW]) {
  if constexpr (kW == 1) {
    store<kKind>(p, u, x[0]);
  } else {
    store_vec<kKind>(p, u, x);
  }
}

template <int kKind, int kW>
__global__ void gelu_kernel(const void* pre, void* h, int64_t units) {
  for (int64_t u = first_index(); u < units; u += grid_stride()) {
    float z[kW];
    ld<kKind, kW>(pre, u, z);
#pragma unroll
    for (int k = 0; k < kW; ++k) z[k] = elementwise_math::gelu<float>(z[k]);
    st<kKind, kW>(h, u, z);
  }
}

template <int kKind, int kW>
__global__ void gelu_backward_kernel(const void* dh, const void* pre, void* dpre, int64_t units) {
  for (int64_t u = first_index(); u < units; u += grid_stride()) {
    float g[kW], z[kW];
    ld<kKind, kW>(dh, u, g);
    ld<kKind, kW>(pre, u, z);
#pragma unroll
    for (int k = 0; k < kW; ++k) g[k] *= elementwise_math::gelu_grad<float>(z[k]);
    st<kKind, kW>(dpre, u, g);
  }
}

template <int kKind, int kW>
__global__ void add_to_f32_kernel(const void* a, const void* b, float* target, int64_t units) {
  for (int64_t u = first_index(); u < units; u += grid_stride()) {
    float x[kW], y[kW];
    ld<kKind, kW>(a, u, x);
    ld<kKind, kW>(b, u, y);
#pragma unroll
    for (int k = 0; k < kW; ++k) x[k] += y[k];
    st<0, kW>(target, u, x);
  }
}

template <int kKind, int kW>
__global__ void squared_error_kernel(const void* out, const void* x, const float* target, void* dy,
                                     int64_t units, double grad_scale, double* partials) {
  __shared__ double block_sum[kThreads];
  double sum = 0.0;
  for (int64_t u = first_index(); u < units; u += grid_stride()) {
    float o[kW], r[kW], t[kW];
    ld<kKind, kW>(out, u, o);
    ld<kKind, kW>(x, u, r);
    ld<0, kW>(target, u, t);
#pragma unroll
    for (int k = 0; k < kW; ++k) {
      const double d = static_cast<double>(o[k]) + static_cast<double>(r[k]) - t[k];
      sum += d * d;
      o[k] = static_cast<float>(d * grad_scale);
    }
    st<kKind, kW>(dy, u, o);
  }
  // A tree in shared memory: a fixed order for a fixed launch, so a rerun gives the same bits.
  block_sum[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      block_sum[threadIdx.x] += block_sum[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = block_sum[0];
}

template <int kGrad, int kValue, int kW>
__global__ void optimizer_kernel(OptimizerArgs a, int64_t units) {
  if (a.corrections != nullptr) {
    a.c1 = static_cast<float>(a.corrections[0]);
    a.c2 = static_cast<float>(a.corrections[1]);
  }
  for (int64_t u = first_index(); u < units; u += grid_stride()) {
    float g[kW], w[kW];
    ld<kGrad, kW>(a.grad, u, g);
    ld<0, kW>(a.master, u, w);
    if (a.adam) {
      float m[kW], v[kW];
      ld<0, kW>(a.m, u, m);
      ld<0, kW>(a.v, u, v);
#pragma unroll
      for (int k = 0; k < kW; ++k) {
        elementwise_math::adam<float>(w[k], m[k], v[k], g[k], a.lr, a.beta1, a.beta2, a.omb1,
                                      a.omb2, a.eps, a.c1, a.c2);
      }
      st<0, kW>(a.m, u, m);
      st<0, kW>(a.v, u, v);
    } else {
#pragma unroll
      for (int k = 0; k < kW; ++k) w[k] -= a.lr * g[k];
    }
    st<0, kW>(a.master, u, w);
    st<kValue, kW>(a.value, u, w);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls f(kind constant) for kind 0, 1 or 2 (kind_of's fp32, bf16, fp16).
template <class F>
cudaError_t by_kind(DType t, F&& f) {
  switch (kind_of(t)) {
    case 0:
      f(std::integral_constant<int, 0>{});
      return cudaSuccess;
    case 1:
      f(std::integral_constant<int, 1>{});
      return cudaSuccess;
    case 2:
      f(std::integral_constant<int, 2>{});
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;
  }
}

// Calls f(width constant): kVec when every pointer is 16-byte aligned and n % kVec == 0.
template <class F>
void by_width(int64_t n, std::initializer_list<const void*> ptrs, F&& f) {
  bool vec = n % kVec == 0;
  for (const void* p : ptrs) vec = vec && aligned16(p);
  if (vec) {
    f(std::integral_constant<int, kVec>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

}  // namespace

cudaError_t launch_gelu(const void* pre, void* h, DType t, int64_t n, cudaStream_t stream) {
  clear_stale_error();
  if (n <= 0) return cudaSuccess;
  const cudaError_t rc = by_kind(t, [&](auto kind) {
    by_width(n, {pre, h}, [&](auto w) {
      constexpr int kK = decltype(kind)::value, kW = decltype(w)::value;
      gelu_kernel<kK, kW><<<blocks_for(n / kW), kThreads, 0, stream>>>(pre, h, n / kW);
    });
  });
  return rc != cudaSuccess ? rc : cudaGetLastError();
}

cudaError_t launch_gelu_backward(const void* dh, const void* pre, void* dpre, DType t, int64_t n,
                                 cudaStream_t stream) {
  clear_stale_error();
  if (n <= 0) return cudaSuccess;
  const cudaError_t rc = by_kind(t, [&](auto kind) {
    by_width(n, {dh, pre, dpre}, [&](auto w) {
      constexpr int kK = decltype(kind)::value, kW = decltype(w)::value;
      gelu_backward_kernel<kK, kW>
          <<<blocks_for(n / kW), kThreads, 0, stream>>>(dh, pre, dpre, n / kW);
    });
  });
  return rc != cudaSuccess ? rc : cudaGetLastError();
}

cudaError_t launch_add_to_f32(const void* a, const void* b, DType t, float* target, int64_t n,
                              cudaStream_t stream) {
  clear_stale_error();
  if (n <= 0) return cudaSuccess;
  const cudaError_t rc = by_kind(t, [&](auto kind) {
    by_width(n, {a, b, target}, [&](auto w) {
      constexpr int kK = decltype(kind)::value, kW = decltype(w)::value;
      add_to_f32_kernel<kK, kW><<<blocks_for(n / kW), kThreads, 0, stream>>>(a, b, target, n / kW);
    });
  });
  return rc != cudaSuccess ? rc : cudaGetLastError();
}

cudaError_t launch_squared_error(const void* out, const void* x, const float* target, void* dy,
                                 DType t, int64_t n, double grad_scale, double* partials,
                                 int* blocks, cudaStream_t stream) {
  clear_stale_error();
  *blocks = 0;
  if (n <= 0) return cudaSuccess;
  const cudaError_t rc = by_kind(t, [&](auto kind) {
    by_width(n, {out, x, target, dy}, [&](auto w) {
      constexpr int kK = decltype(kind)::value, kW = decltype(w)::value;
      const auto grid = static_cast<int>(std::min<unsigned>(blocks_for(n / kW), kMaxLossBlocks));
      *blocks = grid;
      squared_error_kernel<kK, kW>
          <<<grid, kThreads, 0, stream>>>(out, x, target, dy, n / kW, grad_scale, partials);
    });
  });
  return rc != cudaSuccess ? rc : cudaGetLastError();
}

cudaError_t launch_optimizer(const OptimizerArgs& a, cudaStream_t stream) {
  clear_stale_error();
  if (a.n <= 0) return cudaSuccess;
  cudaError_t inner = cudaSuccess;
  const cudaError_t rc = by_kind(a.grad_dtype, [&](auto grad_kind) {
    inner = by_kind(a.value_dtype, [&](auto value_kind) {
      const bool adam = a.adam;
      by_width(a.n, {a.master, adam ? a.m : a.master, adam ? a.v : a.master, a.grad, a.value},
               [&](auto w) {
                 constexpr int kG = decltype(grad_kind)::value;
                 constexpr int kV = decltype(value_kind)::value;
                 constexpr int kW = decltype(w)::value;
                 optimizer_kernel<kG, kV, kW>
                     <<<blocks_for(a.n / kW), kThreads, 0, stream>>>(a, a.n / kW);
               });
    });
  });
  if (rc != cudaSuccess) return rc;
  if (inner != cudaSuccess) return inner;
  return cudaGetLastError();
}

}  // namespace cgemm::cuda
