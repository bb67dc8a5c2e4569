#pragma once
// The C API's handle table: what a cgemm_context or cgemm_plan the caller holds stands for.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "capi_errors.hpp"

namespace cgemm::capi {

// The live objects behind the caller's handles. A handle is a serial number (never reused)
// with a tag for its kind, not an address: a destroyed handle, a copy of one, a plan passed as
// a context or any other value is found missing and refused, never dereferenced, and a new
// object can never be reached through an old handle.
template <typename T>
class Handles {
 public:
  // first: the first serial; kinds that share a tag (2 bits, 5 kinds) take disjoint ranges.
  Handles(uintptr_t tag, const char* type, uintptr_t first = 1)
      : next_(first), first_(first), tag_(tag), type_(type) {}

  uintptr_t add(std::unique_ptr<T> object) {
    const std::lock_guard<std::mutex> lock(mu_);
    const uintptr_t h = (next_++ << 2) | tag_;
    live_.emplace(h, std::move(object));
    return h;
  }
  // The object of a live handle; throws ArgumentError naming `what` otherwise.
  T& get(uintptr_t h, const char* what) {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = live_.find(h);
    if (it == live_.end()) throw ArgumentError(stale(h, what));
    return *it->second;
  }
  // Destroys every live object for which pred(object) holds (outside the lock: a destructor
  // may call back into the C API's tables).
  template <typename Pred>
  void erase_if(Pred pred) {
    std::vector<std::unique_ptr<T>> gone;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      for (auto it = live_.begin(); it != live_.end();) {
        if (pred(*it->second)) {
          gone.push_back(std::move(it->second));
          it = live_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  std::unique_ptr<T> take(uintptr_t h, const char* what) {
    const std::lock_guard<std::mutex> lock(mu_);
    const auto it = live_.find(h);
    if (it == live_.end()) throw ArgumentError(stale(h, what));
    std::unique_ptr<T> object = std::move(it->second);
    live_.erase(it);
    return object;
  }

 private:
  std::string stale(uintptr_t h, const char* what) const {
    const bool ours = (h & 3u) == tag_ && h >> 2 >= first_ && h >> 2 < next_;
    return std::string(what) + " is not a live " + type_ +
           (ours ? ": it was destroyed already" : ": not a handle cgemm returned");
  }

  std::mutex mu_;
  std::unordered_map<uintptr_t, std::unique_ptr<T>> live_;
  uintptr_t next_;
  const uintptr_t first_;
  const uintptr_t tag_;
  const char* const type_;
};

}  // namespace cgemm::capi
