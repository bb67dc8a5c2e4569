#pragma once
// The fp64 reference of one linear layer (tp_linear.hpp) on its global tensors, for the layer
// tests (included by path from the tests' folders: "../support/linear_reference.hpp").

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "global_tensors.hpp"

namespace cgemm::test {

// Global tensors of one linear layer in storage order ([B, S, H], or [S, B, H] sequence-first)
// and the fp64 reference of its outputs and gradients.
struct Dims {
  int64_t b, s, k, n;
  bool tbs;
  int64_t at(int64_t bi, int64_t si, int64_t h, int64_t hidden) const {
    return ((tbs ? si * b + bi : bi * s + si) * hidden) + h;
  }
};

struct Reference {
  std::vector<double> y, dx, dw, db;
};

// y = x W + b, dx = dy W^T, and this dp rank's dW = x^T dy and db = sum dy over batches
// [b0, b1) (the layers leave the dp sum to the caller).
inline Reference linear_reference(const Dims& d, const std::vector<double>& x,
                                  const std::vector<double>& w, const std::vector<double>& bias,
                                  const std::vector<double>& dy, int64_t b0, int64_t b1) {
  Reference r;
  r.y.assign(static_cast<size_t>(d.b * d.s * d.n), 0.0);
  r.dx.assign(static_cast<size_t>(d.b * d.s * d.k), 0.0);
  r.dw.assign(static_cast<size_t>(d.k * d.n), 0.0);
  r.db.assign(static_cast<size_t>(d.n), 0.0);
  for (int64_t bi = 0; bi < d.b; ++bi) {
    for (int64_t si = 0; si < d.s; ++si) {
      const bool mine = bi >= b0 && bi < b1;
      for (int64_t j = 0; j < d.n; ++j) {
        double acc = bias.empty() ? 0.0 : bias[static_cast<size_t>(j)];
        const double g = dy[static_cast<size_t>(d.at(bi, si, j, d.n))];
        for (int64_t p = 0; p < d.k; ++p) {
          const double xv = x[static_cast<size_t>(d.at(bi, si, p, d.k))];
          const double wv = w[static_cast<size_t>(p * d.n + j)];
          acc += xv * wv;
          r.dx[static_cast<size_t>(d.at(bi, si, p, d.k))] += g * wv;
          if (mine) r.dw[static_cast<size_t>(p * d.n + j)] += xv * g;
        }
        r.y[static_cast<size_t>(d.at(bi, si, j, d.n))] = acc;
        if (mine) r.db[static_cast<size_t>(j)] += g;
      }
    }
  }
  return r;
}

// Compares this rank's shard `got` with the reference's shard; tolerance relative to the
// tensor's largest reference value (fp32 sums of a few dozen terms).
inline void expect_near(const std::string& what, const std::vector<float>& got,
                        const std::vector<double>& ref, const Shape& gshape, const Shape& offset,
                        const Shape& local, double rel) {
  const auto want = shard(ref, gshape, offset, local);
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1.0;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= rel * scale) && bad++ < 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

}  // namespace cgemm::test
