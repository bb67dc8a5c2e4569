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

int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw Error(what + ": " + std::to_string(a) + " x " + std::to_string(b) + " overflows int64");
  }
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    throw Error(what + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows int64");
  }
  return r;
}

int64_t checked_bytes(int64_t elements, size_t element_size, const std::string& what) {
  return checked_mul(elements, static_cast<int64_t>(element_size), what + " (bytes)");
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
