#pragma once
// The one parser for cgemm's environment variables (CGEMM_GEMM_AUTOTUNE, CGEMM_NCCL_MAX_CTAS,
// ...): one rule for every flag, and a typo is an error rather than a silent default.

#include <optional>

namespace cgemm {

/// The flag `name`: std::nullopt when unset or empty; true for 1/on/true/yes and false for
/// 0/off/false/no, in any case. Any other value throws cgemm::Error naming the variable and
/// the value.
std::optional<bool> env_flag(const char* name);

/// The integer `name` (decimal, optional sign): std::nullopt when unset or empty. A value that
/// is not a whole integer in range throws cgemm::Error naming the variable and the value.
std::optional<long long> env_int(const char* name);

}  // namespace cgemm
