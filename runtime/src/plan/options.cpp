// Names of the backend and transport kinds, as cgemm-run's --backend and --transport spell them.
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

constexpr std::array<std::pair<TransportKind, std::string_view>, 5> kTransports{{
    {TransportKind::kAuto, "auto"},
    {TransportKind::kMpi, "mpi"},
    {TransportKind::kUcx, "ucx"},
    {TransportKind::kNccl, "nccl"},
    {TransportKind::kCe, "ce"},
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

std::string transport_kind_name(TransportKind k) {
  for (const auto& [kind, name] : kTransports) {
    if (kind == k) return std::string(name);
  }
  return "unknown";
}

TransportKind parse_transport_kind(const std::string& name) {
  for (const auto& [kind, n] : kTransports) {
    if (n == name) return kind;
  }
  throw Error("unknown transport '" + name + "' (known: auto, mpi, ucx, nccl, ce)");
}

}  // namespace cgemm
