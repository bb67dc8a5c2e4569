#pragma once
// Tensor shapes (dims outermost first) and their element counts.

#include <cstdint>
#include <string>
#include <vector>

namespace cgemm {

using Shape = std::vector<int64_t>;

/// The product of the dims (1 for a scalar shape), in checked 64-bit arithmetic: throws
/// cgemm::Error naming the shape when a dim is negative or the product overflows int64_t.
int64_t num_elements(const Shape& s);
std::string shape_str(const Shape& s);  // "[4, 8192, 4096]"

/// a * b and a + b in checked 64-bit arithmetic: throw cgemm::Error("<what>: ... overflows
/// int64") instead of wrapping. For sizes, element counts and byte counts.
int64_t checked_mul(int64_t a, int64_t b, const std::string& what);
int64_t checked_add(int64_t a, int64_t b, const std::string& what);
/// Bytes of `elements` elements of `element_size` bytes each, checked (as checked_mul).
int64_t checked_bytes(int64_t elements, size_t element_size, const std::string& what);

}  // namespace cgemm
