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

}  // namespace cgemm
