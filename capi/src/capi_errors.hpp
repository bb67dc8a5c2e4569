#pragma once
// The C API's own errors, each one status (cgemm_c.cpp's guarded() maps them); the runtime's
// errors map to the others.

#include "cgemm/core/error.hpp"

namespace cgemm::capi {

// A caller's argument the descriptor conversion refused: CGEMM_ERROR_INVALID_ARGUMENT.
class ArgumentError : public cgemm::Error {
 public:
  using cgemm::Error::Error;
};

// The plan's buffers do not fit the memory they would take: CGEMM_ERROR_OUT_OF_MEMORY.
class OutOfMemoryError : public cgemm::Error {
 public:
  using cgemm::Error::Error;
};

// MPI_Init_thread failed (cgemm_context_create_world[_ex]), or MPI's world disagrees with the
// launcher's (a torchrun-style launch): CGEMM_ERROR_MPI.
class MpiInitError : public cgemm::Error {
 public:
  using cgemm::Error::Error;
};

}  // namespace cgemm::capi
