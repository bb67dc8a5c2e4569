#pragma once
// The engine: runs a Program (program.hpp) on a Backend, for any collective GEMM. It owns the
// plan's workspaces (allocated on first use, collectively for the symmetric ring, in the same
// order on every rank because every rank runs the same programs in the same order) and binds
// the caller's operands to the program's buffer names on every call.

#include "cgemm/runtime/backend.hpp"
#include "program.hpp"

namespace cgemm {

/// The caller's operands of one call (backend memory). bias may be null when no op reads it.
struct Operands {
  const void* lhs = nullptr;
  const void* rhs = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
};

class Engine {
 public:
  /// `world_rank` only selects the rank a test fault (CGEMM_TEST_FAULT, engine.cpp) hits.
  Engine(Backend& be, int world_rank);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Issues every op of `p` in order (asynchronous on the CUDA backend).
  void run(const Program& p, const Operands& x);
  Backend& backend() { return be_; }

 private:
  void ensure(const WorkspaceBytes& need);
  const void* at(const Ref& r, const Operands& x) const;
  void* at_mut(const Ref& r, const Operands& x) const;

  Backend& be_;
  SymmetricBuffer ring_;
  void* send_ = nullptr;
  void* work_in_ = nullptr;
  void* work_out_ = nullptr;
  WorkspaceBytes have_;
  std::vector<ExchangeToken> tokens_;
  int world_rank_ = 0;
};

}  // namespace cgemm
