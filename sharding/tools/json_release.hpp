#pragma once
// Destroying a JSON value without allocating. nlohmann's destructor moves the elements of an
// array or object onto a heap stack as long as the array (so that any depth is destroyed
// without recursion): for a reorder's permutation of 2^20 elements that is 16 MiB more, asked
// for when a case runs out of memory and unwinds, where a failing destructor terminates.

#include "plan_json.hpp"

namespace cgemm::plan {

/// Empties `j` bottom-up: every array and object below it is emptied before the one holding
/// it is freed, so each destructor that runs sees leaves only, and allocates nothing. Recurses
/// once per level: cases are parsed only within kMaxDepth, answers are shallow.
inline void release(Json& j) noexcept {
  if (j.is_array()) {
    auto& items = j.get_ref<Json::array_t&>();
    for (Json& item : items) release(item);
    Json::array_t().swap(items);
  } else if (j.is_object()) {
    auto& members = j.get_ref<Json::object_t&>();
    for (auto& member : members) release(member.second);
    Json::object_t().swap(members);
  }
}

/// Releases a value at the end of its scope, however the scope ends. Not for a value that is
/// returned: it would be emptied.
class ReleaseOnExit {
 public:
  explicit ReleaseOnExit(Json& j) noexcept : j_(j) {}
  ReleaseOnExit(const ReleaseOnExit&) = delete;
  ReleaseOnExit& operator=(const ReleaseOnExit&) = delete;
  ~ReleaseOnExit() { release(j_); }

 private:
  Json& j_;
};

}  // namespace cgemm::plan
