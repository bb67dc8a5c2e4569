// cgemm-bench --parts' chunk GEMMs (launcher/parts/chunked_gemm.cpp), read from the programs
// the runtime plans for each case: the chunks of every case tile the whole local GEMM (each output row written once, from the lhs row the
// schedule would use, inside the buffers), and run on the CPU they give the whole GEMM's
// values, checked against an fp64 reference on random inputs with poisoned outputs.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "bench_config.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/gemm/cpu_gemm.hpp"
#include "parts/parts.hpp"

namespace cgemm::launcher::parts {
namespace {

struct RowMap {
  int64_t lhs_row, out_row;
};

// Every (lhs row, out row) pair a chunk's GEMM touches, checked to lie on row boundaries.
std::vector<RowMap> rows_of(const ChunkGemm& c) {
  const GemmTask& t = c.task;
  EXPECT_EQ(c.lhs_offset % t.k, 0);
  EXPECT_EQ(c.out_offset % t.n, 0);
  EXPECT_EQ(t.lhs_batch_stride % t.k, 0);
  EXPECT_EQ(t.out_batch_stride % t.n, 0);
  std::vector<RowMap> out;
  for (int64_t b = 0; b < t.batch; ++b) {
    for (int64_t i = 0; i < t.m; ++i) {
      out.push_back({(c.lhs_offset + b * t.lhs_batch_stride) / t.k + i,
                     (c.out_offset + b * t.out_batch_stride) / t.n + i});
    }
  }
  return out;
}

TEST(BenchParts, ChunksTileTheWholeGemmForEveryCase) {
  int checked = 0;
  for (const BenchShape& sh : bench_shapes()) {
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      for (int tp : {1, 2, 4, 8}) {
        for (int c : {1, 2, 4}) {
          if (!splits(sh, op, tp, c)) {
            EXPECT_THROW(chunked_gemm(sh, op, tp, c), Error);
            continue;
          }
          SCOPED_TRACE(sh.name + " " + std::string(collective_name(op)) + " tp " +
                       std::to_string(tp) + " c " + std::to_string(c));
          const ChunkedGemm g = chunked_gemm(sh, op, tp, c);
          const GemmTask& w = g.whole;
          ASSERT_EQ(g.chunks.size(), static_cast<size_t>(tp * c));
          EXPECT_EQ(g.lhs_elems, w.m * w.k);
          EXPECT_EQ(g.out_elems, w.m * w.n);
          EXPECT_EQ(g.rhs_elems, w.k * w.n);
          std::vector<int> out_hits(static_cast<size_t>(w.m), 0), lhs_hits(out_hits);
          double flops = 0;
          for (const ChunkGemm& ch : g.chunks) {
            EXPECT_EQ(ch.task.n, w.n);
            EXPECT_EQ(ch.task.k, w.k);
            flops += 2.0 * static_cast<double>(ch.task.batch * ch.task.m * ch.task.n * ch.task.k);
            for (const RowMap& r : rows_of(ch)) {
              ASSERT_GE(r.lhs_row, 0);
              ASSERT_LT(r.lhs_row, w.m);
              ASSERT_GE(r.out_row, 0);
              ASSERT_LT(r.out_row, w.m);
              ++lhs_hits[static_cast<size_t>(r.lhs_row)];
              ++out_hits[static_cast<size_t>(r.out_row)];
            }
          }
          EXPECT_EQ(flops, 2.0 * static_cast<double>(w.m * w.n * w.k));
          for (int64_t i = 0; i < w.m; ++i) {
            ASSERT_EQ(out_hits[static_cast<size_t>(i)], 1) << "out row " << i;
            ASSERT_EQ(lhs_hits[static_cast<size_t>(i)], 1) << "lhs row " << i;
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 50);  // most combinations split
}

TEST(BenchParts, RefusesWhatDoesNotSplit) {
  const BenchShape& tiny = bench_shape("tiny");  // seq 64
  EXPECT_FALSE(splits(tiny, CollectiveOp::kAllGather, 2, 64));
  EXPECT_THROW(chunked_gemm(tiny, CollectiveOp::kAllGather, 2, 64), Error);
  EXPECT_FALSE(splits(tiny, CollectiveOp::kReduceScatter, 3, 1));  // 128 % 3
  EXPECT_FALSE(splits(tiny, CollectiveOp::kNone, 2, 1));
  EXPECT_FALSE(splits(tiny, CollectiveOp::kAllGather, 1, 2));  // tp 1: one piece, no ring
  EXPECT_TRUE(splits(tiny, CollectiveOp::kAllGather, 1, 1));
  // The reason is the planner's, naming the GEMM and its chunk rows.
  EXPECT_NE(why_not_split(tiny, CollectiveOp::kAllGather, 2, 64).find("chunks_per_rank 64"),
            std::string::npos)
      << why_not_split(tiny, CollectiveOp::kAllGather, 2, 64);
}

// The chunks, run in fp32 on the CPU, give each output row the values of its lhs row's
// product, against fp64; outputs start as NaN so a row left unwritten shows.
TEST(BenchParts, ChunksComputeTheWholeGemmOnTheCpu) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const BenchShape& tiny = bench_shape("tiny");
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    for (int tp : {2, 4}) {
      for (int c : {1, 2}) {
        SCOPED_TRACE(std::string(collective_name(op)) + " tp " + std::to_string(tp) + " c " +
                     std::to_string(c));
        const ChunkedGemm g = chunked_gemm(tiny, op, tp, c);
        const int64_t k = g.whole.k, n = g.whole.n;
        std::vector<float> lhs(static_cast<size_t>(g.lhs_elems)),
            rhs(static_cast<size_t>(g.rhs_elems));
        for (float& x : lhs) x = normal(rng);
        for (float& x : rhs) x = normal(rng);
        std::vector<float> out(static_cast<size_t>(g.out_elems),
                               std::numeric_limits<float>::quiet_NaN());
        std::vector<std::pair<int64_t, int64_t>> map;  // out row <- lhs row
        for (const ChunkGemm& ch : g.chunks) {
          GemmTask t = ch.task;
          t.in_dtype = t.out_dtype = DType::kFloat32;
          t.lhs = lhs.data() + ch.lhs_offset;
          t.rhs = rhs.data();
          t.out = out.data() + ch.out_offset;
          cpu_gemm(t);
          for (const RowMap& r : rows_of(ch)) map.emplace_back(r.out_row, r.lhs_row);
        }
        ASSERT_EQ(map.size(), static_cast<size_t>(g.whole.m));
        for (const auto& [o, l] : map) {
          for (int64_t j = 0; j < n; ++j) {
            double ref = 0;
            for (int64_t q = 0; q < k; ++q) {
              ref += static_cast<double>(lhs[static_cast<size_t>(l * k + q)]) *
                     rhs[static_cast<size_t>(q * n + j)];
            }
            const float got = out[static_cast<size_t>(o * n + j)];
            ASSERT_NEAR(got, ref, 1e-4 * (1 + std::abs(ref))) << "out row " << o << " col " << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cgemm::launcher::parts
