// The cuBLASLt tiles runner's row tiling (runtime/src/grouped/grouped_rows.hpp:
// tile_rows, choose_tiling). With overlap allowed: every row of every group is covered, no
// tile leaves its group, each group uses one power-of-two tile size (at most the cap, at least
// half its rows), overlap happens only at a group's last tile. Without overlap: every row in
// exactly one tile, tiles inside their group, power-of-two sizes at most the cap. Both: classes
// by descending rows, the tile count within max_row_tiles, rows_computed right. Checked on
// fixed edge cases and on random sizes (fresh seed each run).

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "grouped/grouped_rows.hpp"

namespace cgemm::grouped {
namespace {

// Without overlap: each row once, tiles inside their groups.
void check_exact_tiling(const std::vector<int32_t>& sizes, int64_t cap) {
  SCOPED_TRACE("no overlap, cap " + std::to_string(cap) + ", " + std::to_string(sizes.size()) +
               " groups");
  const std::vector<TileClass> classes = tile_rows(sizes, cap, TileOverlap::kNone);
  std::vector<int64_t> first(sizes.size() + 1, 0);
  for (size_t g = 0; g < sizes.size(); ++g) first[g + 1] = first[g] + sizes[g];
  std::vector<int> covered(static_cast<size_t>(first.back()), 0);
  int64_t total = 0, previous_rows = INT64_MAX;
  for (const TileClass& c : classes) {
    ASSERT_FALSE(c.tiles.empty());
    ASSERT_LT(c.rows, previous_rows);
    previous_rows = c.rows;
    ASSERT_TRUE(std::has_single_bit(static_cast<uint64_t>(c.rows)));
    ASSERT_LE(c.rows, cap);
    for (const RowTile& t : c.tiles) {
      const auto g = static_cast<size_t>(t.group);
      ASSERT_LT(g, sizes.size());
      ASSERT_GE(t.first, first[g]);
      ASSERT_LE(t.first + c.rows, first[g + 1]) << "group " << g << " tile leaves its group";
      for (int64_t r = t.first; r < t.first + c.rows; ++r) ++covered[static_cast<size_t>(r)];
      ++total;
    }
  }
  for (size_t r = 0; r < covered.size(); ++r) ASSERT_EQ(covered[r], 1) << "row " << r;
  EXPECT_EQ(rows_computed(classes), first.back());
  EXPECT_LE(total, max_row_tiles(first.back(), static_cast<int64_t>(sizes.size()), cap,
                                 TileOverlap::kNone));
}

void check_tiling(const std::vector<int32_t>& sizes, int64_t cap) {
  check_exact_tiling(sizes, cap);
  SCOPED_TRACE("cap " + std::to_string(cap) + ", " + std::to_string(sizes.size()) + " groups");
  const std::vector<TileClass> classes = tile_rows(sizes, cap);
  std::vector<int64_t> first(sizes.size() + 1, 0);  // each group's first row
  for (size_t g = 0; g < sizes.size(); ++g) first[g + 1] = first[g] + sizes[g];
  std::vector<int> covered(static_cast<size_t>(first.back()), 0);
  std::map<int64_t, int64_t> tile_of_group;  // one tile size per group
  int64_t total = 0, previous_rows = INT64_MAX;
  for (const TileClass& c : classes) {
    ASSERT_FALSE(c.tiles.empty());
    ASSERT_LT(c.rows, previous_rows) << "classes must come by descending rows, each once";
    previous_rows = c.rows;
    ASSERT_TRUE(std::has_single_bit(static_cast<uint64_t>(c.rows)));
    ASSERT_LE(c.rows, cap);
    for (const RowTile& t : c.tiles) {
      ASSERT_GE(t.group, 0);
      ASSERT_LT(t.group, static_cast<int64_t>(sizes.size()));
      const auto g = static_cast<size_t>(t.group);
      ASSERT_GE(t.first, first[g]) << "group " << g;
      ASSERT_LE(t.first + c.rows, first[g + 1]) << "group " << g << " tile leaves its group";
      auto [it, fresh] = tile_of_group.emplace(t.group, c.rows);
      ASSERT_EQ(it->second, c.rows) << "group " << g << " has two tile sizes";
      // Not smaller than needed: half the group's rows, or the cap.
      ASSERT_GT(2 * c.rows, std::min<int64_t>(2 * cap - 1, sizes[g]));
      for (int64_t r = t.first; r < t.first + c.rows; ++r) ++covered[static_cast<size_t>(r)];
      ++total;
    }
  }
  for (size_t g = 0; g < sizes.size(); ++g) {
    if (sizes[g] == 0) {
      EXPECT_EQ(tile_of_group.count(static_cast<int64_t>(g)), 0u) << "an empty group got a tile";
      continue;
    }
    // Every row once, except the rows the group's last tile shares with the one before.
    const int64_t t = tile_of_group.at(static_cast<int64_t>(g));
    const int64_t twice = sizes[g] % t == 0 ? 0 : t - sizes[g] % t;
    int64_t seen_twice = 0;
    for (int64_t r = first[g]; r < first[g + 1]; ++r) {
      const int n = covered[static_cast<size_t>(r)];
      ASSERT_TRUE(n == 1 || n == 2) << "row " << r << " covered " << n << " times";
      seen_twice += n == 2 ? 1 : 0;
    }
    EXPECT_EQ(seen_twice, twice) << "group " << g;
  }
  EXPECT_LE(total, max_row_tiles(first.back(), static_cast<int64_t>(sizes.size()), cap,
                                 TileOverlap::kAllowed));
  EXPECT_EQ(rows_computed(classes), std::accumulate(covered.begin(), covered.end(), int64_t{0}));
}

TEST(RowTiles, EdgeCases) {
  check_tiling({24, 24, 24, 24}, 256);
  check_tiling({61, 3, 0, 28}, 256);
  check_tiling({0, 0, 96, 0}, 256);
  check_tiling({96}, 256);
  check_tiling({1, 0, 1, 0}, 256);
  check_tiling({600, 1, 0, 300}, 256);
  check_tiling({256, 512, 257, 255}, 256);
  check_tiling({1000, 7}, 1);
  check_tiling({0, 0, 0}, 256);
}

TEST(RowTiles, UniformGroupsAreOneClassWithoutOverlap) {
  const std::vector<int32_t> sizes(64, 256);
  const std::vector<TileClass> c = tile_rows(sizes, 256);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].rows, 256);
  ASSERT_EQ(c[0].tiles.size(), 64u);
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(c[0].tiles[i].first, static_cast<int64_t>(i) * 256);
  const std::vector<TileClass> big = tile_rows(std::vector<int32_t>(8, 4096), 256);
  ASSERT_EQ(big.size(), 1u);
  EXPECT_EQ(big[0].tiles.size(), 8u * 16u);
}

// choose_tiling: 256-row tiles unless 128-row ones compute at least 5% fewer rows (overlap
// allowed); without overlap always 256.
TEST(RowTiles, ChooseTiling) {
  const std::vector<int32_t> uniform(64, 256);
  EXPECT_EQ(choose_tiling(uniform, TileOverlap::kAllowed).front().rows, 256);
  // 64 groups of 130 rows: 256-row caps give 128-row tiles anyway (the group is under 256).
  // 64 groups of 300: cap 256 computes 512 rows a group, cap 128 computes 384.
  const std::vector<int32_t> over(64, 300);
  const auto small = choose_tiling(over, TileOverlap::kAllowed);
  ASSERT_EQ(small.size(), 1u);
  EXPECT_EQ(small.front().rows, 128);
  EXPECT_EQ(rows_computed(small), 64 * 384);
  const auto exact = choose_tiling(over, TileOverlap::kNone);
  EXPECT_EQ(exact.front().rows, 256);
  EXPECT_EQ(rows_computed(exact), 64 * 300);
  // 64 groups of 1000: 4 tiles of 256 (1024 rows) against 8 of 128 (1024): the same rows, 256.
  EXPECT_EQ(choose_tiling(std::vector<int32_t>(64, 1000), TileOverlap::kAllowed).front().rows, 256);
}

TEST(RowTiles, RandomSizes) {
  const uint32_t seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const int groups = std::uniform_int_distribution<int>(1, 70)(rng);
    const int max_size = std::uniform_int_distribution<int>(1, 3000)(rng);
    std::vector<int32_t> sizes(static_cast<size_t>(groups));
    for (int32_t& s : sizes) {
      s = std::bernoulli_distribution(0.15)(rng)
              ? 0
              : std::uniform_int_distribution<int>(0, max_size)(rng);
    }
    const int64_t cap = int64_t{1} << std::uniform_int_distribution<int>(0, 10)(rng);
    check_tiling(sizes, cap);
    if (testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace cgemm::grouped

namespace cgemm::grouped {
namespace {

// The CUDA runners' alignment rule (grouped_rows.hpp): 16-byte bases and leading dims.
TEST(RowTiles, Alignment16) {
  alignas(16) static char buf[256];
  EXPECT_TRUE(aligned16(buf, 0));
  EXPECT_TRUE(aligned16(buf, 32));
  EXPECT_FALSE(aligned16(buf, 8));
  EXPECT_FALSE(aligned16(buf + 2, 0));
  RaggedRowsGeometry g;
  g.groups = 4;
  g.m_total = 96;
  g.n = 24;  // 48 bytes in bf16
  g.k = 40;  // 80 bytes
  EXPECT_TRUE(bases_and_lds_aligned16(g, buf, buf + 16, buf + 32));
  EXPECT_FALSE(bases_and_lds_aligned16(g, buf + 2, buf, buf));  // lhs base
  g.n = 20;                                                     // 40 bytes: rhs and out lds
  EXPECT_FALSE(bases_and_lds_aligned16(g, buf, buf, buf));
  g.n = 24;
  g.lhs_trans = true;
  g.m_total = 92;  // lhs [K, M]: ld 184 bytes
  EXPECT_FALSE(bases_and_lds_aligned16(g, buf, buf, buf));
  g.dtype = g.rhs_dtype = g.out_dtype = DType::kFloat32;  // 368 bytes
  EXPECT_TRUE(bases_and_lds_aligned16(g, buf, buf, buf));
}

// The device tiles' one tile size: 128 rows, halved while over M.
TEST(RowTiles, DeviceTileRows) {
  EXPECT_EQ(device_tile_rows(32768), 128);
  EXPECT_EQ(device_tile_rows(300), 128);
  EXPECT_EQ(device_tile_rows(128), 128);
  EXPECT_EQ(device_tile_rows(127), 64);
  EXPECT_EQ(device_tile_rows(5), 4);
  EXPECT_EQ(device_tile_rows(1), 1);
}

}  // namespace
}  // namespace cgemm::grouped
