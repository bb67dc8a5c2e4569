#include "cgemm/core/env.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != b[i]) return false;
  }
  return true;
}

// The variable's value; null when unset or empty.
const char* value(const EnvKnob& knob) {
  const char* v = std::getenv(std::string(knob.name).c_str());
  return v == nullptr || *v == '\0' ? nullptr : v;
}

}  // namespace

std::optional<bool> env_flag(const EnvKnob& knob) {
  const std::string name(knob.name);
  const char* v = value(knob);
  if (v == nullptr) return std::nullopt;
  const std::string_view s(v);
  for (const char* yes : {"1", "on", "true", "yes"}) {
    if (iequals(s, yes)) return true;
  }
  for (const char* no : {"0", "off", "false", "no"}) {
    if (iequals(s, no)) return false;
  }
  throw Error(name + "='" + v + "' is not a flag (1/0, on/off, true/false, yes/no; any case)");
}

std::optional<long long> env_int(const EnvKnob& knob) {
  const char* v = value(knob);
  if (v == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') {
    throw Error(std::string(knob.name) + "='" + v + "' is not an integer");
  }
  return x;
}

std::optional<std::string> env_text(const EnvKnob& knob) {
  const char* v = value(knob);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

bool fp8_gemm_high_precision_accumulation() {
  const std::optional<std::string> v = env_text(env::kFp8HighPrecisionAccumulation);
  return v.has_value() && *v == "1";
}

bool all_reduce_in_float32() {
  const std::optional<std::string> v = env_text(env::kAllReduceInFp32);
  return !(v.has_value() && *v == "0");
}

}  // namespace cgemm
