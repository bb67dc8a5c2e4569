#pragma once
// Global tensors for the MPI tests: every rank draws the same global tensor from a shared seed
// and takes its shard by a plan's offsets (included by path from the tests' folders:
// "../support/global_tensors.hpp").

#include <cstdint>
#include <random>
#include <vector>

#include "cgemm/core/convert.hpp"
#include "cgemm/core/dtype.hpp"
#include "cgemm/core/shape.hpp"

namespace cgemm::test {

/// Row-major strides of `s`, in elements.
inline std::vector<int64_t> strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

/// The shard of `global` (shape gshape) at `offset` of shape `local`, row-major.
template <class T>
std::vector<T> shard(const std::vector<T>& global, const Shape& gshape, const Shape& offset,
                     const Shape& local) {
  const auto gs = strides(gshape);
  const auto ls = strides(local);
  std::vector<T> out(static_cast<size_t>(num_elements(local)));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    int64_t g = 0;
    for (size_t d = 0; d < local.size(); ++d) g += ((i / ls[d]) % local[d] + offset[d]) * gs[d];
    out[static_cast<size_t>(i)] = global[static_cast<size_t>(g)];
  }
  return out;
}

/// Global values in +-[0.25, 1] (never zero) from `seed` and `stream` (which tells tensors
/// apart), rounded to `dtype` so a reference sees what the GEMM reads.
inline std::vector<double> random_tensor(const Shape& s, DType dtype, uint32_t seed,
                                         uint32_t stream) {
  std::mt19937 gen(seed + 7919u * stream);
  std::uniform_real_distribution<double> mag(0.25, 1.0);
  std::bernoulli_distribution sign(0.5);
  std::vector<double> v(static_cast<size_t>(num_elements(s)));
  std::vector<char> buf(dtype_size(dtype));
  for (double& x : v) {
    const float f = static_cast<float>(sign(gen) ? mag(gen) : -mag(gen));
    float r = 0.0f;
    convert_from_float(&f, buf.data(), dtype, 1);
    convert_to_float(buf.data(), dtype, &r, 1);
    x = r;
  }
  return v;
}

}  // namespace cgemm::test
