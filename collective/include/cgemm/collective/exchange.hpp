#pragma once
// The one exchange type of cgemm: what a ring step moves between the ranks of a
// tensor-parallel group, whatever transport moves it (transport.hpp). Validated once, by
// validate_exchange_group(), before any transport sees it.

#include <cstddef>
#include <span>
#include <string_view>

namespace cgemm {

/// A buffer of the same size on every rank of the tensor-parallel group, allocated
/// collectively (every TP rank allocates it with the same size, in the same order), so a
/// transport can write straight into a peer's copy. `id` names it to the transports, which
/// attach it when it is made (Transport::attach).
struct SymmetricBuffer {
  void* local = nullptr;  // this rank's copy
  size_t bytes = 0;
  int id = -1;
};

/// Half of a pairwise exchange as seen by one rank: send `bytes` from local `src` to TP rank
/// `send_peer`, where they land in that peer's copy of `dst` at `send_offset`; and receive
/// `bytes` from TP rank `recv_peer` into this rank's copy of `dst` at `recv_offset`. The peers
/// post the matching halves with the same `bytes`. A peer equal to this rank is not allowed.
struct Exchange {
  const void* src = nullptr;
  size_t bytes = 0;
  int send_peer = -1;
  size_t send_offset = 0;
  int recv_peer = -1;
  size_t recv_offset = 0;
  const SymmetricBuffer* dst = nullptr;
  const char* label = nullptr;  // what it is, for traces and timeout messages; may be null
};

/// Throws cgemm::Error, prefixed with `where` and naming the exchange, when an exchange of
/// `group` has a peer outside [0, tp) or equal to `me`, no destination, a range outside its
/// destination, or a null source with bytes to send.
void validate_exchange_group(std::span<const Exchange> group, int me, int tp,
                             std::string_view where);

}  // namespace cgemm
