#pragma once
// error_of: the message of the exception a call throws, for the tests that check a refusal's
// words (included by path from the tests' folders: "../support/error_of.hpp").

#include <string>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm::test {

/// The what() of the E that f() throws; "" when it throws none, so that a check of the
/// message's words fails, printing the empty message.
template <typename E = Error, typename F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace cgemm::test
