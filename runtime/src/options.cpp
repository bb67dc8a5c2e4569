// Names of the backend kinds, as cgemm-run's --backend option spells them.
#include "cgemm/runtime/options.hpp"

#include <array>
#include <string_view>
#include <utility>

#include "cgemm/sharding/types.hpp"

namespace cgemm {

namespace {

constexpr std::array<std::pair<BackendKind, std::string_view>, 3> kBackends{{
    {BackendKind::kAuto, "auto"},
    {BackendKind::kCpu, "cpu"},
    {BackendKind::kCuda, "cuda"},
}};

}  // namespace

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
