#pragma once
// The engine: runs a Program (program.hpp) on a Backend, for any collective GEMM. It owns the
// plan's workspaces (allocated on first use, collectively for the symmetric ring, in the same
// order on every rank because every rank runs the same programs in the same order) and binds
// the caller's operands to the program's buffer names on every call.

#include <array>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/operands.hpp"
#include "program.hpp"

namespace cgemm {

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
  /// The scale state (kScales) `p` uses, as floats (host copy; synchronous), allocated and set
  /// to p.scales_init first if no program ran yet. Empty when p keeps none.
  std::vector<float> scales(const Program& p);
  /// Overwrites it. Throws cgemm::Error when `s` is not the state's size.
  void set_scales(const Program& p, const std::vector<float>& s);

 private:
  void ensure(const Program& p);
  const void* at(const Ref& r, const Operands& x) const;
  void* at_mut(const Ref& r, const Operands& x) const;
  void* base(Workspace w) const;

  Backend& be_;
  SymmetricBuffer ring_;
  // The private workspaces (all but the ring), indexed by Workspace.
  std::array<void*, 6> private_{};
  WorkspaceSizes have_;
  std::vector<ExchangeToken> tokens_;
  int world_rank_ = 0;
};

}  // namespace cgemm
