#pragma once
// The one CUDA runtime error check of cgemm (gemm/, collective/, runtime/). Every failing CUDA
// call becomes a cgemm::Error naming where it ran (e.g. "rank 3 (tp 1, GPU 1)"), the call with
// its sizes, and CUDA's error name and text. Header-only; only for code compiled with CUDA.

#if !defined(CGEMM_HAVE_CUDA)
#error "cgemm/core/cuda_check.hpp is for code built with CUDA (CGEMM_HAVE_CUDA)"
#endif

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "cgemm/core/error.hpp"

namespace cgemm {

[[noreturn]] inline void throw_cuda_error(cudaError_t rc, std::string_view call,
                                          std::string_view where = {}) {
  std::string msg;
  if (!where.empty()) {
    msg.append(where).append(": ");
  }
  msg.append(call).append(" failed: ").append(cudaGetErrorName(rc));
  msg.append(" (").append(cudaGetErrorString(rc)).append(")");
  throw Error(msg);
}

/// `call` should name the sizes involved; build it only on failure where that costs.
inline void check_cuda(cudaError_t rc, std::string_view call, std::string_view where = {}) {
  if (rc != cudaSuccess) throw_cuda_error(rc, call, where);
}

}  // namespace cgemm
