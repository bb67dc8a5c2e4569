#pragma once
// A symmetric workspace that the engines of several plans share: the fsdp ring, where an FSDP
// plan's gathered weight lives only while its call runs (fsdp/fsdp_gather.hpp). One per Context,
// at the largest size any of its plans needs, so a model's FSDP plans hold one gathered weight
// between them, not one each (what makes FSDP save memory). The layer pair's dgrad reads the
// weight it gathers again from the same ring, and a Context's second one holds the rank-major
// shards that gather reorders (layers/fsdp_weight_gather.hpp).
//
// Sharing is safe because the plans' calls are ordered: every call starts with a fork (its
// exchanges and streams wait for the backend's stream 0) and ends with a join into stream 0, so
// one plan's exchanges never overwrite the slots another plan's GEMMs still read, on this rank
// or (the receiving side posts its half after its own fork) on a peer.

#include <cstdint>
#include <string>
#include <utility>

#include "cgemm/collective/exchange.hpp"
#include "cgemm/collective/group.hpp"
#include "cgemm/runtime/backend.hpp"

namespace cgemm {

class SharedRing {
 public:
  /// Over `group`, named `name` in errors ("fsdp ring"); nothing is allocated until reserve().
  SharedRing(Group group, std::string name) : group_(group), name_(std::move(name)) {}
  ~SharedRing();
  SharedRing(const SharedRing&) = delete;
  SharedRing& operator=(const SharedRing&) = delete;

  /// Makes the buffer at least `bytes`. Growing is collective over the group (after the backend
  /// finished every call that used the old buffer, a new symmetric buffer, then the old one
  /// released: both are held for that moment): every rank makes the same plans in the same
  /// order, so every rank grows alike.
  /// Throws cgemm::Error naming both sizes when it must grow after a call was captured into a
  /// CUDA graph with it (the graph holds the old buffer's address).
  void reserve(Backend& be, int64_t bytes);
  /// A call captured with the buffer as it is now: later growth is refused (above).
  void mark_captured() { captured_ = true; }
  /// The engines that use the buffer: when the last one goes (drop_user), the buffer is
  /// released (after the backend finished with it), so a sweep's next plans start from nothing.
  void add_user() { ++users_; }
  void drop_user() noexcept;
  const SymmetricBuffer& buffer() const { return buf_; }
  int64_t bytes() const { return static_cast<int64_t>(buf_.bytes); }

 private:
  Backend* be_ = nullptr;  // the backend the buffer came from (set by the first reserve)
  Group group_;
  std::string name_;
  SymmetricBuffer buf_;
  bool captured_ = false;
  int users_ = 0;
};

}  // namespace cgemm
