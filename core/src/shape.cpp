#include "cgemm/core/shape.hpp"

#include "cgemm/core/error.hpp"

namespace cgemm {

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw Error("shape " + shape_str(s) + " has a negative dimension");
    if (__builtin_mul_overflow(n, d, &n)) {
      throw Error("the element count of shape " + shape_str(s) + " overflows int64");
    }
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace cgemm
