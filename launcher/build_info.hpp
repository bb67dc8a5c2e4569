#pragma once
// What a result file says about the build that wrote it: cgemm's version (CMake's
// PROJECT_VERSION) and the git commit of the source tree at build time.

#include <string>

namespace cgemm::launcher {

std::string cgemm_version();  // "0.1.0"
/// The commit hash, with "-dirty" when tracked files had changes at build time; empty when
/// the source was not a git checkout (a tarball) or git was missing.
std::string git_commit();

}  // namespace cgemm::launcher
