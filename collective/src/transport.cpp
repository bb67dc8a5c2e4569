// What every transport shares: the one validation of an exchange group and the one choice of a
// transport per peer.

#include "cgemm/collective/transport.hpp"

#include <algorithm>
#include <string>

#include "cgemm/core/error.hpp"

namespace cgemm {

void validate_exchange_group(std::span<const Exchange> group, int me, int tp,
                             std::string_view where) {
  for (const Exchange& x : group) {
    const std::string what =
        std::string(where) + ": exchange '" + (x.label != nullptr ? x.label : "unnamed") + "' of " +
        std::to_string(x.bytes) + " bytes to tp rank " + std::to_string(x.send_peer) +
        " at offset " + std::to_string(x.send_offset) + ", from tp rank " +
        std::to_string(x.recv_peer) + " at offset " + std::to_string(x.recv_offset);
    if (x.send_peer < 0 || x.send_peer >= tp || x.send_peer == me || x.recv_peer < 0 ||
        x.recv_peer >= tp || x.recv_peer == me) {
      throw Error(what + ": peers must be other ranks of the TP group (size " + std::to_string(tp) +
                  ", this is tp rank " + std::to_string(me) + ")");
    }
    if (x.dst == nullptr || x.dst->local == nullptr) throw Error(what + ": no destination buffer");
    const size_t cap = x.dst->bytes;
    if (x.send_offset > cap || x.bytes > cap - x.send_offset || x.recv_offset > cap ||
        x.bytes > cap - x.recv_offset) {
      throw Error(what + ": outside the destination's " + std::to_string(cap) + " bytes");
    }
    if (x.bytes > 0 && x.src == nullptr) throw Error(what + ": null source");
  }
}

std::vector<Transport*> choose_transports(std::span<Transport* const> candidates, int me, int tp,
                                          std::string_view where) {
  std::vector<Transport*> chosen(static_cast<size_t>(tp), nullptr);
  for (int peer = 0; peer < tp; ++peer) {
    if (peer == me) continue;
    for (Transport* t : candidates) {
      if (t != nullptr && t->can_connect(peer)) {
        chosen[static_cast<size_t>(peer)] = t;
        break;
      }
    }
    if (chosen[static_cast<size_t>(peer)] == nullptr) {
      std::string names;
      for (Transport* t : candidates) {
        if (t != nullptr) names += (names.empty() ? "" : ", ") + t->name();
      }
      throw Error(std::string(where) + ": no transport reaches tp rank " + std::to_string(peer) +
                  " (offered: " + (names.empty() ? "none" : names) + ")");
    }
  }
  return chosen;
}

StartedGroup start_group(std::span<Transport* const> chosen, std::span<const Exchange> group,
                         void* stream, std::string_view where) {
  StartedGroup started;
  std::vector<Transport*> order;
  for (const Exchange& x : group) {
    Transport* t = chosen[static_cast<size_t>(x.send_peer)];
    if (t != chosen[static_cast<size_t>(x.recv_peer)]) {
      throw Error(std::string(where) + ": exchange '" + (x.label != nullptr ? x.label : "unnamed") +
                  "' sends to tp rank " + std::to_string(x.send_peer) + " over " + t->name() +
                  " but receives from tp rank " + std::to_string(x.recv_peer) + " over " +
                  chosen[static_cast<size_t>(x.recv_peer)]->name() +
                  ": one exchange must use one transport");
    }
    if (std::find(order.begin(), order.end(), t) == order.end()) order.push_back(t);
  }
  for (Transport* t : order) {
    if (order.size() == 1) {
      started.parts.emplace_back(t, t->start(group, stream));
      break;
    }
    std::vector<Exchange> mine;
    for (const Exchange& x : group) {
      if (chosen[static_cast<size_t>(x.send_peer)] == t) mine.push_back(x);
    }
    started.parts.emplace_back(t, t->start(mine, stream));
  }
  return started;
}

}  // namespace cgemm
