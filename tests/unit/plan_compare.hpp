#pragma once
// The comparison rule of the planner cases (tests/data/PLANNER_SCHEMA.md, "Comparison rule"),
// shared by the in-process and the cgemm-plan binary tests.

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "plan_json.hpp"

namespace cgemm::plan::test {

struct AnsweredCase {
  Json input;     // the case, with its id
  Json expected;  // the answer cgemm-plan must give
};

inline std::vector<AnsweredCase> load_cases(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<AnsweredCase> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = Json::parse(line);
    cases.push_back({j.at("case"), j.at("expected")});
  }
  return cases;
}

inline bool is_integer(const Json& j) { return j.is_number_integer() || j.is_number_unsigned(); }

// Typed equality: an integer never equals a float or a boolean, unlike Json's operator==.
inline bool same_value(const Json& e, const Json& a) {
  if (is_integer(e)) {
    if (!is_integer(a)) return false;
    if (e.is_number_unsigned() != a.is_number_unsigned()) {
      // Mixed signedness: equal only when both are non-negative and the same.
      const Json& s = e.is_number_unsigned() ? a : e;
      const Json& u = e.is_number_unsigned() ? e : a;
      return s.get<int64_t>() >= 0 && static_cast<uint64_t>(s.get<int64_t>()) == u.get<uint64_t>();
    }
    return e == a;
  }
  if (e.is_array()) {
    if (!a.is_array() || a.size() != e.size()) return false;
    for (size_t i = 0; i < e.size(); ++i) {
      if (!same_value(e[i], a[i])) return false;
    }
    return true;
  }
  if (e.is_object()) {
    if (!a.is_object()) return false;
    for (const auto& [key, value] : e.items()) {
      if (!a.contains(key) || !same_value(value, a.at(key))) return false;
    }
    return true;
  }
  return e.type() == a.type() && e == a;
}

/// "" when `answer` is acceptable for `expected`, else why not.
inline std::string compare_answer(const Json& expected, const Json& answer) {
  if (!answer.is_object()) return "answer is not an object: " + answer.dump();
  if (!answer.contains("id") || !same_value(expected.at("id"), answer.at("id"))) {
    return "id mismatch: expected " + expected.at("id").dump() + ", got " +
           (answer.contains("id") ? answer.at("id").dump() : "none");
  }
  if (expected.contains("error")) {
    const bool ok = answer.contains("error") && answer.at("error").is_string() &&
                    !answer.at("error").get<std::string>().empty();
    return ok ? "" : "expected an error, got " + answer.dump();
  }
  if (answer.contains("error")) return "unexpected error: " + answer.at("error").dump();
  for (const auto& [key, value] : expected.items()) {
    if (!answer.contains(key)) return "missing field '" + key + "'";
    if (!same_value(value, answer.at(key))) {
      return "field '" + key + "': expected " + value.dump() + ", got " + answer.at(key).dump();
    }
  }
  return "";
}

}  // namespace cgemm::plan::test
