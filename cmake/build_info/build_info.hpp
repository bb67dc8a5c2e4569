#pragma once
// What the tools say of the build they belong to: in --version and in every report, so a
// result can be traced to the source that produced it.

#include <string>

namespace cgemm::build_info {

/// The project's version, "0.1.0".
const char* version();
/// The source's git commit at build time ("93e3b90c1a2b", "-dirty" appended when tracked
/// files differed from it), or "unknown" outside a git checkout.
const char* commit();

/// What every tool's --version prints: "cgemm-run 0.1.0 (commit 93e3b90c1a2b)".
inline std::string version_line(const std::string& program) {
  return program + " " + version() + " (commit " + commit() + ")\n";
}

}  // namespace cgemm::build_info
