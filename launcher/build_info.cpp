#include "build_info.hpp"

// Written by git_commit.cmake at every build (and rewritten only when the commit changes, so
// nothing rebuilds otherwise): defines CGEMM_GIT_COMMIT.
#include "cgemm_git_commit.hpp"

#ifndef CGEMM_VERSION
#define CGEMM_VERSION "(version unknown)"
#endif

namespace cgemm::launcher {

std::string cgemm_version() { return CGEMM_VERSION; }

std::string git_commit() { return CGEMM_GIT_COMMIT; }

}  // namespace cgemm::launcher
