#pragma once
// Whether this test binary runs under AddressSanitizer: it reserves terabytes of address space
// for its shadow memory, so a test under `ulimit -v` or RLIMIT_AS cannot start its process
// there and skips that part (the plain build runs it). Global: inside namespace cgemm a
// nested `testing` would hide GoogleTest's.

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderAddressSanitizer = true;
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
#else
inline constexpr bool kUnderAddressSanitizer = false;
#endif
