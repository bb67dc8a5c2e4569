// The sequence reorders against an independent reshape/transpose model, on permutations
// and on real buffers, and their errors.

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "cgemm/sharding/reorder.hpp"

namespace cgemm {
namespace {

// numpy's x.reshape(dims).transpose(axes).reshape(-1) on x = arange(prod(dims)): the
// source flat index of each output element, walking the output in row-major order.
std::vector<int64_t> naive_transpose(const std::vector<int64_t>& dims,
                                     const std::vector<size_t>& axes) {
  const size_t rank = dims.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t k = rank; k-- > 1;) strides[k - 1] = strides[k] * dims[k];
  std::vector<int64_t> out_dims(rank);
  for (size_t k = 0; k < rank; ++k) out_dims[k] = dims[axes[k]];
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<int64_t> result;
  std::vector<int64_t> idx(rank, 0);  // multi-index into the output
  for (int64_t n = 0; n < total; ++n) {
    int64_t src = 0;
    for (size_t k = 0; k < rank; ++k) src += idx[k] * strides[axes[k]];
    result.push_back(src);
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < out_dims[k]) break;
      idx[k] = 0;
    }
  }
  return result;
}

// gemm.py's two reorders, written as their reshape and transpose.
std::vector<int64_t> naive_reorder(ReorderKind kind, const Shape& shape, int dp, int tpsp) {
  std::vector<int64_t> dims;
  std::vector<size_t> axes;
  if (kind == ReorderKind::kTpspLeading) {
    dims = {dp, shape[0] / dp, tpsp, shape[1] / tpsp};
    axes = {2, 0, 1, 3};
  } else {
    dims = {tpsp, dp, shape[0] / dp, shape[1] / tpsp};
    axes = {1, 2, 0, 3};
  }
  for (size_t d = 2; d < shape.size(); ++d) {
    dims.push_back(shape[d]);
    axes.push_back(d + 2);
  }
  return naive_transpose(dims, axes);
}

struct Geometry {
  Shape shape;
  int dp, tpsp;
};

// Every small shape both reorders accept with non-zero size.
std::vector<Geometry> valid_geometries() {
  std::vector<Geometry> out;
  const std::vector<Shape> shapes = {{1, 1},    {2, 4},    {4, 2},       {6, 4},    {4, 6, 3},
                                     {2, 8, 5}, {6, 6, 2}, {4, 4, 3, 2}, {1, 4, 2}, {3, 1, 2}};
  for (const auto& s : shapes) {
    for (int dp : {1, 2, 3}) {
      for (int tpsp : {1, 2, 3, 4}) {
        if (s[0] % dp == 0 && s[1] % tpsp == 0) out.push_back({s, dp, tpsp});
      }
    }
  }
  return out;
}

const ReorderKind kKinds[] = {ReorderKind::kTpspLeading, ReorderKind::kDpLeading};

TEST(PlannerReorder, PermutationMatchesReshapeTranspose) {
  const auto geometries = valid_geometries();
  ASSERT_GT(geometries.size(), 40u);
  for (const auto& g : geometries) {
    for (ReorderKind kind : kKinds) {
      EXPECT_EQ(reorder_permutation(kind, g.shape, g.dp, g.tpsp),
                naive_reorder(kind, g.shape, g.dp, g.tpsp))
          << shape_str(g.shape) << " dp=" << g.dp << " tpsp=" << g.tpsp
          << " kind=" << static_cast<int>(kind);
    }
  }
}

TEST(PlannerReorder, KnownSmallPermutation) {
  // shape (4, 2), dp 2, tpsp 2: rows (d, i) with columns t -> (t, d, i).
  EXPECT_EQ(reorder_permutation(ReorderKind::kTpspLeading, {4, 2}, 2, 2),
            (std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(reorder_permutation(ReorderKind::kDpLeading, {4, 2}, 2, 2),
            (std::vector<int64_t>{0, 4, 1, 5, 2, 6, 3, 7}));
}

template <typename T>
void check_apply_matches_permutation(const Geometry& g, ReorderKind kind) {
  const auto perm = reorder_permutation(kind, g.shape, g.dp, g.tpsp);
  std::vector<T> src(perm.size()), dst(perm.size(), T(~T(0)));
  std::iota(src.begin(), src.end(), T(0));
  apply_reorder(kind, g.shape, g.dp, g.tpsp, src.data(), dst.data(), sizeof(T));
  for (size_t i = 0; i < perm.size(); ++i) {
    ASSERT_EQ(dst[i], static_cast<T>(perm[i]))
        << "element " << i << " of " << shape_str(g.shape) << " dp=" << g.dp << " tpsp=" << g.tpsp
        << " element size " << sizeof(T);
  }
}

TEST(PlannerReorder, ApplyAgreesWithPermutationForTwoAndFourByteElements) {
  for (const auto& g : valid_geometries()) {
    for (ReorderKind kind : kKinds) {
      check_apply_matches_permutation<uint16_t>(g, kind);
      check_apply_matches_permutation<uint32_t>(g, kind);
    }
  }
}

// What holds: on every shape they accept, the two reorders are each other's inverse in
// both orders (dp-leading undoes tpsp-leading and vice versa), because both reshape to the
// same (dp, n, tpsp, m) grid. With tpsp == 1 both are the identity; with dp == 1 they are not.
TEST(PlannerReorder, ReordersAreMutualInverses) {
  for (const auto& g : valid_geometries()) {
    const auto t = reorder_permutation(ReorderKind::kTpspLeading, g.shape, g.dp, g.tpsp);
    const auto d = reorder_permutation(ReorderKind::kDpLeading, g.shape, g.dp, g.tpsp);
    // Applying p then q to x gives x[p[q[i]]].
    for (size_t i = 0; i < t.size(); ++i) {
      ASSERT_EQ(t[static_cast<size_t>(d[i])], static_cast<int64_t>(i)) << shape_str(g.shape);
      ASSERT_EQ(d[static_cast<size_t>(t[i])], static_cast<int64_t>(i)) << shape_str(g.shape);
    }
    if (g.tpsp == 1) {
      std::vector<int64_t> identity(t.size());
      std::iota(identity.begin(), identity.end(), 0);
      EXPECT_EQ(t, identity);
      EXPECT_EQ(d, identity);
    }
  }
  EXPECT_NE(reorder_permutation(ReorderKind::kTpspLeading, {2, 4}, 1, 2),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(PlannerReorder, ApplyRoundTripRestoresTheBuffer) {
  const Shape shape{4, 6, 3};
  std::vector<float> x(72), y(72), z(72);
  std::iota(x.begin(), x.end(), 0.5f);
  apply_reorder(ReorderKind::kTpspLeading, shape, 2, 3, x.data(), y.data(), sizeof(float));
  EXPECT_NE(x, y);
  apply_reorder(ReorderKind::kDpLeading, shape, 2, 3, y.data(), z.data(), sizeof(float));
  EXPECT_EQ(x, z);
}

TEST(PlannerReorder, DivisibilityErrors) {
  for (ReorderKind kind : kKinds) {
    EXPECT_THROW(check_reorder(kind, {3, 4}, 2, 2), PlanError);  // dim 0
    EXPECT_THROW(check_reorder(kind, {4, 3}, 2, 2), PlanError);  // dim 1
    EXPECT_THROW(reorder_permutation(kind, {4, 3}, 2, 2), PlanError);
    EXPECT_THROW(check_reorder(kind, {4}, 1, 1), PlanError);  // no dim 1
    EXPECT_THROW(check_reorder(kind, {4, 4}, 0, 1), PlanError);
  }
  try {
    check_reorder(ReorderKind::kTpspLeading, {3, 4}, 2, 2);
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("Original_shape[0]=3"), std::string::npos) << e.what();
  }
}

TEST(PlannerReorder, DimOfOnePassesTheAssertionButNotTheReshape) {
  for (ReorderKind kind : kKinds) {
    EXPECT_THROW(check_reorder(kind, {1, 4}, 2, 2), PlanError);
    EXPECT_THROW(check_reorder(kind, {4, 1}, 2, 2), PlanError);
    // A zero-size tensor reshapes to any zero-size view, so it passes.
    EXPECT_NO_THROW(check_reorder(kind, {1, 4, 0}, 2, 2));
    EXPECT_TRUE(reorder_permutation(kind, {1, 4, 0}, 2, 2).empty());
    EXPECT_TRUE(reorder_permutation(kind, {0, 4}, 2, 2).empty());
    EXPECT_NO_THROW(apply_reorder(kind, {0, 4}, 2, 2, nullptr, nullptr, 4));
    EXPECT_EQ(reorder_permutation(kind, {1, 1}, 1, 1), (std::vector<int64_t>{0}));
  }
}

TEST(PlannerReorder, ApplyRejectsOverlapAndBadElementSize) {
  std::vector<uint32_t> buf(16);
  EXPECT_THROW(
      apply_reorder(ReorderKind::kTpspLeading, {2, 4}, 2, 2, buf.data(), buf.data() + 4, 4), Error);
  EXPECT_THROW(
      apply_reorder(ReorderKind::kTpspLeading, {2, 4}, 2, 2, buf.data(), buf.data() + 8, 0), Error);
  EXPECT_NO_THROW(
      apply_reorder(ReorderKind::kTpspLeading, {2, 4}, 2, 2, buf.data(), buf.data() + 8, 4));
}

}  // namespace
}  // namespace cgemm
