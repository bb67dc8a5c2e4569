#pragma once
// The error type every layer of cgemm throws.

#include <stdexcept>

namespace cgemm {

/// Every failure in cgemm is a cgemm::Error (or derived): the message names the operand,
/// the shapes and the axis involved.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A rule of Transformer Engine's gemm.py was violated (its ValueError/assert/RuntimeError).
class PlanError : public Error {
 public:
  using Error::Error;
};

}  // namespace cgemm
