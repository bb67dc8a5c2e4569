// The CUDA backend's exchanges in flight (see exchange_fifo.hpp).

#include "exchange_fifo.hpp"

#include <utility>

#include "cgemm/core/cuda_check.hpp"

namespace cgemm::cuda {

std::string group_name(std::span<const Exchange> group) {
  std::string n = group.empty() || group[0].label == nullptr ? "exchange" : group[0].label;
  for (size_t i = 1; i < group.size(); ++i) {
    if (group[i].label != nullptr) n += std::string(" + ") + group[i].label;
  }
  return n;
}

ExchangeFifo::~ExchangeFifo() {
  // The owner has synchronized the device. Errors are ignored: a destructor cannot report them.
  for (auto& [token, x] : pending_) cudaEventDestroy(x.event);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
}

cudaEvent_t ExchangeFifo::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags",
             where_);
  return e;
}

std::string ExchangeFifo::peer(Group g, int rank) const {
  return peer_ ? peer_(g, rank) : std::string(group_name(g)) + " rank " + std::to_string(rank);
}

ExchangeToken ExchangeFifo::push(Group over, std::span<const Exchange> group, cudaStream_t comm) {
  if (pending_.size() >= kMaxPending && !capture_from_) recycle(false);
  cudaEvent_t e = take_event();
  check_cuda(cudaEventRecord(e, comm), "cudaEventRecord(exchange)", where_);
  std::string name = group_name(group);
  std::string what = "exchange '" + name + "'";
  for (const Exchange& x : group) {
    what += " (to " + peer(over, x.send_peer) + ", from " + peer(over, x.recv_peer) + ")";
  }
  pending_[next_token_] = {e, std::move(what), std::move(name)};
  return next_token_++;
}

std::string ExchangeFifo::name(ExchangeToken token) const {
  auto it = pending_.find(token);
  return it != pending_.end() ? it->second.name
                              : "exchange " + std::to_string(token) + " (complete)";
}

void ExchangeFifo::wait(ExchangeToken token, cudaStream_t st) {
  if (token < 0 || token >= next_token_) {
    throw Error(where_ + ": wait_exchange: unknown exchange " + std::to_string(token) + " (" +
                std::to_string(next_token_) + " started)");
  }
  auto it = pending_.find(token);
  if (it == pending_.end()) return;  // recycled, so known to be complete
  check_cuda(cudaStreamWaitEvent(st, it->second.event, 0), "cudaStreamWaitEvent(exchange)", where_);
}

void ExchangeFifo::begin_capture() { capture_from_ = next_token_; }

void ExchangeFifo::end_capture() noexcept {
  if (!capture_from_) return;
  for (auto it = pending_.lower_bound(*capture_from_); it != pending_.end();) {
    free_events_.push_back(it->second.event);
    it = pending_.erase(it);
  }
  capture_from_.reset();
}

void ExchangeFifo::recycle(bool all_done) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    // A captured exchange's event is a graph node: it cannot be queried (nor is it complete).
    if (capture_from_ && it->first >= *capture_from_) break;
    bool done = all_done;
    if (!done) {
      const cudaError_t rc = cudaEventQuery(it->second.event);
      if (rc == cudaErrorNotReady) static_cast<void>(cudaGetLastError());  // not an error
      if (rc != cudaSuccess && rc != cudaErrorNotReady) {
        check_cuda(rc, "cudaEventQuery(exchange)", where_);
      }
      done = rc == cudaSuccess;
    }
    if (!done) break;  // one FIFO: the exchanges after one in flight are in flight too
    free_events_.push_back(it->second.event);
    it = pending_.erase(it);
  }
}

watchdog::WaitScope ExchangeFifo::host_wait(const char* call, bool drain_first) {
  if (drain_first) drain();
  std::vector<std::pair<cudaEvent_t, std::string>> pending;
  for (const auto& [token, x] : pending_) pending.emplace_back(x.event, x.what);
  return watchdog::WaitScope([pending = std::move(pending), call, where = where_] {
    for (const auto& [event, what] : pending) {
      if (cudaEventQuery(event) == cudaErrorNotReady) {
        return what + " on the communication stream, in " + call + " (" + where + ")";
      }
    }
    return std::string("this GPU's work, in ") + call + " (" + where + ")";
  });
}

}  // namespace cgemm::cuda
