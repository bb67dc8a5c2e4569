#pragma once
// CUDA error checks for collective/ (private; runtime/ and gemm/ use cgemm/gemm/cuda_check.hpp,
// which this layer cannot see). Messages name where (rank), the call and its sizes.

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "cgemm/sharding/types.hpp"

namespace cgemm::detail {

[[noreturn]] inline void throw_cuda(cudaError_t rc, std::string_view call, std::string_view where) {
  std::string msg;
  if (!where.empty()) msg.append(where).append(": ");
  msg.append(call).append(" failed: ").append(cudaGetErrorName(rc));
  msg.append(" (").append(cudaGetErrorString(rc)).append(")");
  throw Error(msg);
}

inline void check_cuda(cudaError_t rc, std::string_view call, std::string_view where) {
  if (rc != cudaSuccess) throw_cuda(rc, call, where);
}

}  // namespace cgemm::detail
