#pragma once
// The CUDA backend's exchanges in flight: one completion event per started group, recorded on
// the communication stream, in start order. The communication stream runs the groups one after
// another, so the events complete in order too (a FIFO): compute streams wait on a group's
// event (wait_exchange), and a host wait that hangs is named after the oldest group not yet
// complete.

#include <cuda_runtime_api.h>

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/backend.hpp"

namespace cgemm::cuda {

/// The name of a group in traces: its labels joined by " + " ("exchange" when the first has
/// none).
std::string group_name(std::span<const Exchange> group);

class ExchangeFifo {
 public:
  /// `peer(g, p)` names rank p of group g in the watchdog's lines ("world rank R (host H)":
  /// MeshComms's describe_rank); unset: "tp rank p" or "dp rank p".
  /// `before_host_wait`: called first by host_wait (the transports' drain: a host wait must
  /// not wait for a stream that waits on this host).
  explicit ExchangeFifo(std::string where, std::function<std::string(Group, int)> peer = {},
                        std::function<void()> before_host_wait = {})
      : where_(std::move(where)),
        peer_(std::move(peer)),
        before_host_wait_(std::move(before_host_wait)) {}
  ~ExchangeFifo();
  ExchangeFifo(const ExchangeFifo&) = delete;
  ExchangeFifo& operator=(const ExchangeFifo&) = delete;

  /// Records the completion of `group`, just started over `over` on `comm` (the communication
  /// stream), and returns its token.
  ExchangeToken push(Group over, std::span<const Exchange> group, cudaStream_t comm);
  /// The group's name (group_name) while it is pending, else "exchange N (complete)".
  std::string name(ExchangeToken token) const;
  /// Later work on `st` waits for exchange `token`. Throws for a token never returned by push.
  void wait(ExchangeToken token, cudaStream_t st);
  /// Forgets the completed exchanges, oldest first, their events kept for reuse; `all_done`:
  /// the caller knows that every exchange has completed (after a device synchronization).
  void recycle(bool all_done);
  /// For a host wait on this GPU in `call` (a string literal): the watchdog names the oldest
  /// exchange not yet complete (its event is queried from the watchdog's thread), else the
  /// GPU's own work.
  /// Runs `before_host_wait` (drain() first, unless `drain_first` is false: a caller that
  /// drained itself, catching), then the scope.
  watchdog::WaitScope host_wait(const char* call, bool drain_first = true);
  /// Between these, the exchanges pushed are being captured into a CUDA graph: their events
  /// are graph nodes, which cannot be queried (recycle skips them), and end_capture forgets
  /// them, their events kept for reuse (a wait on their tokens after the capture is a no-op:
  /// the graph orders its own work).
  void begin_capture();
  void end_capture() noexcept;
  /// The `before_host_wait` of the constructor alone.
  void drain() {
    if (before_host_wait_) before_host_wait_();
  }

 private:
  static constexpr size_t kMaxPending = 256;  // beyond this, completed ones are recycled

  cudaEvent_t take_event();
  std::string peer(Group g, int rank) const;

  // Exchanges not yet known to be complete: their event and what they are (for timeouts).
  struct Pending {
    cudaEvent_t event = nullptr;
    std::string what;
    std::string name;  // for traces
  };
  std::string where_;
  std::function<std::string(Group, int)> peer_;
  std::function<void()> before_host_wait_;
  std::map<ExchangeToken, Pending> pending_;
  std::vector<cudaEvent_t> free_events_;
  ExchangeToken next_token_ = 0;
  std::optional<ExchangeToken> capture_from_;  // the first token of the capture in progress
};

}  // namespace cgemm::cuda
