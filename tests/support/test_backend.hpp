#pragma once
// The backend an MPI test runs on (included by path: "../support/test_backend.hpp"): the CPU
// backend, or with CGEMM_TEST_BACKEND=cuda the CUDA backend, its ranks sharing the GPUs. Where
// some rank has no GPU the answer is no backend on every rank (an MPI_MIN over the world), so the
// test skips alike everywhere, as the GPU tests do.

#include <mpi.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/options.hpp"

namespace cgemm::test {

/// Collective over MPI_COMM_WORLD. nullopt: CGEMM_TEST_BACKEND=cuda and some rank has no GPU.
inline std::optional<BackendOptions> backend_from_env() {
  const char* b = std::getenv("CGEMM_TEST_BACKEND");
  const bool cuda = b != nullptr && std::string(b) == "cuda";
  int gpu = !cuda || cuda_backend_available() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &gpu, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (gpu == 0) return std::nullopt;
  BackendOptions o;
  o.kind = cuda ? BackendKind::kCuda : BackendKind::kCpu;
  o.gpu_sharing = cuda;
  return o;
}

inline const char* backend_word(const BackendOptions& o) {
  return o.kind == BackendKind::kCuda ? "cuda" : "cpu";
}

}  // namespace cgemm::test
