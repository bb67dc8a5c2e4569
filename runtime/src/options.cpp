// Names of the backend kinds, as cgemm-run's --backend option spells them.
#include "cgemm/runtime/options.hpp"

#include <array>
#include <string_view>
#include <utility>

#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {

constexpr std::array<std::pair<BackendKind, std::string_view>, 3> kBackends{{
    {BackendKind::kAuto, "auto"},
    {BackendKind::kCpu, "cpu"},
    {BackendKind::kCuda, "cuda"},
}};

constexpr std::array<std::pair<OverlapPolicy, std::string_view>, 3> kPolicies{{
    {OverlapPolicy::kAuto, "auto"},
    {OverlapPolicy::kAlways, "on"},
    {OverlapPolicy::kNever, "off"},
}};

}  // namespace

std::string overlap_policy_name(OverlapPolicy p) {
  for (const auto& [policy, name] : kPolicies) {
    if (policy == p) return std::string(name);
  }
  return "unknown";
}

OverlapPolicy parse_overlap_policy(const std::string& name) {
  for (const auto& [policy, n] : kPolicies) {
    if (n == name) return policy;
  }
  throw Error("unknown overlap policy '" + name + "' (known: auto, on, off)");
}

std::string backend_name(BackendKind k) {
  for (const auto& [kind, name] : kBackends) {
    if (kind == k) return std::string(name);
  }
  return "unknown";
}

BackendKind parse_backend(const std::string& name) {
  for (const auto& [kind, n] : kBackends) {
    if (n == name) return kind;
  }
  throw Error("unknown backend '" + name + "' (known: auto, cpu, cuda)");
}

}  // namespace cgemm
