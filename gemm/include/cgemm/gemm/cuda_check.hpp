#pragma once
// CUDA runtime error checks shared by cgemm's CUDA code (gemm/, runtime/). Every failing CUDA
// call becomes a cgemm::Error naming where it ran (e.g. "rank 3 (tp 1, GPU 1)"), the call with
// its sizes, and CUDA's error name and text. Only built with CUDA.

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "cgemm/sharding/types.hpp"

namespace cgemm {

[[noreturn]] inline void throw_cuda_error(cudaError_t rc, std::string_view call,
                                          std::string_view where) {
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
