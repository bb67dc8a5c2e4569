#pragma once
// The engine: runs a Program (program.hpp) on a Backend, for any collective GEMM. It owns the
// plan's workspaces, allocated by prepare() before any program runs (collectively for the
// symmetric ring: every rank prepares the same programs in the same order), and binds the
// caller's operands to the program's buffer names on every call. A run allocates none of the
// engine's workspaces (a backend may still make its own on first use, e.g. the CUDA backend's
// copy-engine collectives their staging buffer); what a grouped GEMM's path needs on the
// backend (Backend::prepare_grouped_gemm) is made by prepare() too.

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cgemm/runtime/backend.hpp"
#include "cgemm/runtime/operands.hpp"
#include "program.hpp"
#include "shared_ring.hpp"

namespace cgemm {

class Engine {
 public:
  /// `world_rank` only selects the rank a test fault (CGEMM_TEST_FAULT, engine.cpp) hits.
  /// `fsdp_ring`: the fsdp ring the engines of a Context's plans share (shared_ring.hpp), which
  /// must outlive this engine; null: this engine makes its own.
  Engine(Backend& be, int world_rank, SharedRing* fsdp_ring = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Allocates what `programs` need: the ring (symmetric over their ring_group: a collective
  /// call; every program with a ring names the same group, else cgemm::Error), the fsdp ring
  /// (symmetric over the fsdp group, after the ring)
  /// and each private workspace at the largest size any of them needs, and the scale state,
  /// set to its programs' scales_init. May be called again with more programs: private
  /// workspaces grow, the ring and the scale state are made once (a later program needing a
  /// larger ring throws cgemm::Error).
  void prepare(std::span<const Program* const> programs);
  /// Issues every op of `p` in order (asynchronous on the CUDA backend). Throws cgemm::Error,
  /// issuing nothing, when `p` needs a workspace prepare() did not make.
  /// Inside a capture (Backend::capturing) `p` is checked first (check_capturable, naming
  /// `name`).
  void run(const Program& p, const Operands& x, const std::string& name = "");
  /// run(), bracketed by the caller's stream when `external` is not null: stream 0 waits for
  /// the work queued on it (Backend::after_external), and it waits for the program's work after,
  /// also when the run throws midway (the work queued before the failure still uses the
  /// caller's buffers). Operands are checked by the caller first, so a refused call queues no
  /// wait on any stream.
  ///
  /// When `external` is being captured into a CUDA graph (the caller's own capture, e.g.
  /// torch.cuda.graph), the program is first checked (check_capturable, naming `name`), and
  /// its issue is bracketed by Backend::begin_capture / end_capture.
  void run_on(const Program& p, const Operands& x, void* external, const std::string& name = "");
  /// Throws cgemm::Error "NAME cannot be captured into a CUDA graph: WHY" when `p` cannot be
  /// (program.hpp's capture_refusal, with the backend's answer for its transports).
  void check_capturable(const Program& p, const std::string& name) const;
  /// check_capturable, then run_on(p, x, stream) captured into a graph of the backend
  /// (Backend::capture_graph); returns its id. `p` and this engine must outlive the graph.
  int64_t capture(const Program& p, const Operands& x, void* stream, const std::string& name);
  Backend& backend() { return be_; }
  /// Where prepared workspace `w` starts (null where none was made): for a helper that hands out
  /// what its program wrote there (QuantizedTensor's FP8 copies and scale_inv).
  void* workspace(Workspace w) const { return base(w); }
  /// The scale state (kScales) `p` uses, as floats (host copy; synchronous). Empty when p
  /// keeps none.
  std::vector<float> scales(const Program& p);
  /// Overwrites it. Throws cgemm::Error when `s` is not the state's size.
  void set_scales(const Program& p, const std::vector<float>& s);
  /// Grouped GEMM calls that ran the loop instead of their planned path (Backend::grouped_gemm
  /// returned false), over every run of this engine.
  int64_t grouped_loop_fallbacks() const { return grouped_fallbacks_; }
  /// The backend's handle of the grouped GEMM of `shape` (prepared); 0 where none.
  GroupedGemmHandle grouped_handle(const GroupedGemmShape& shape) const;

 private:
  void check_prepared(const Program& p) const;
  // What the programs' collectives stage on their first call, made now
  // (Backend::reserve_collectives): no call allocates it later, inside a capture say.
  void reserve_collectives(std::span<const Program* const> programs);
  const void* at(const Ref& r, const Operands& x) const;
  void* at_mut(const Ref& r, const Operands& x) const;
  void* base(Workspace w) const;

  Backend& be_;
  SymmetricBuffer ring_;
  std::optional<Group> ring_group_;    // that of the programs with a ring (they agree)
  SymmetricBuffer fsdp_ring_;          // Workspace::kFsdpRing, over the fsdp group, when not shared
  SharedRing* shared_fsdp_ = nullptr;  // the Context's, when shared
  bool uses_shared_fsdp_ = false;      // a user of it (SharedRing::add_user)
  const SymmetricBuffer& fsdp_ring() const {
    return shared_fsdp_ != nullptr ? shared_fsdp_->buffer() : fsdp_ring_;
  }
  // The private workspaces (all but the ring and the host one), indexed by Workspace.
  std::array<void*, kWorkspaces.size()> private_{};
  std::vector<std::byte> host_;  // Workspace::kHost
  // What the backend made for each grouped GEMM shape the prepared programs run.
  std::vector<std::pair<GroupedGemmShape, GroupedGemmHandle>> grouped_;
  int64_t grouped_fallbacks_ = 0;
  WorkspaceSizes have_;
  std::vector<ExchangeToken> tokens_;
  int world_rank_ = 0;
  long exchanges_run_ = 0;  // for the test fault (CGEMM_TEST_FAULT, engine.cpp)
};

}  // namespace cgemm
