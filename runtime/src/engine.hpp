#pragma once
// The engine: runs a Program (program.hpp) on a Backend, for any collective GEMM. It owns the
// plan's workspaces, allocated by prepare() before any program runs (collectively for the
// symmetric ring: every rank prepares the same programs in the same order), and binds the
// caller's operands to the program's buffer names on every call. A run allocates none of the
// engine's workspaces (a backend may still make its own on first use, e.g. the CUDA backend's
// copy-engine collectives their staging buffer).

#include <array>
#include <optional>
#include <span>

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

  /// Allocates what `programs` need: the ring (symmetric over their ring_group: a collective
  /// call; every program with a ring names the same group, else cgemm::Error)
  /// and each private workspace at the largest size any of them needs, and the scale state,
  /// set to its programs' scales_init. May be called again with more programs: private
  /// workspaces grow, the ring and the scale state are made once (a later program needing a
  /// larger ring throws cgemm::Error).
  void prepare(std::span<const Program* const> programs);
  /// Issues every op of `p` in order (asynchronous on the CUDA backend). Throws cgemm::Error,
  /// issuing nothing, when `p` needs a workspace prepare() did not make.
  void run(const Program& p, const Operands& x);
  Backend& backend() { return be_; }
  /// The scale state (kScales) `p` uses, as floats (host copy; synchronous). Empty when p
  /// keeps none.
  std::vector<float> scales(const Program& p);
  /// Overwrites it. Throws cgemm::Error when `s` is not the state's size.
  void set_scales(const Program& p, const std::vector<float>& s);

 private:
  void check_prepared(const Program& p) const;
  const void* at(const Ref& r, const Operands& x) const;
  void* at_mut(const Ref& r, const Operands& x) const;
  void* base(Workspace w) const;

  Backend& be_;
  SymmetricBuffer ring_;
  std::optional<Group> ring_group_;  // that of the programs with a ring (they agree)
  // The private workspaces (all but the ring), indexed by Workspace.
  std::array<void*, 6> private_{};
  WorkspaceSizes have_;
  std::vector<ExchangeToken> tokens_;
  int world_rank_ = 0;
  long exchanges_run_ = 0;  // for the test fault (CGEMM_TEST_FAULT, engine.cpp)
};

}  // namespace cgemm
