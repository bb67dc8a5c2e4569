// cgemm-bench --parts' chunk GEMMs (launcher/bench/parts/chunked_gemm.cpp), read from the programs
// the runtime plans for each case, in bf16 and quantized to per-tensor FP8 (--scaling current):
// the chunks of every case tile the whole local GEMM (each output row written once, from the
// lhs row the schedule would use, inside the buffers), FP8 chunks are the runtime's FP8 GEMMs
// (dtypes, rhs [N, K], fast accumulation), and run on the CPU they give the whole GEMM's
// values, checked against an fp64 reference on random inputs with poisoned outputs.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "bench/bench_config.hpp"
#include "bench/parts/grouped_sizes.hpp"
#include "bench/parts/parts.hpp"
#include "cgemm/core/convert.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/gemm/cpu_gemm.hpp"
#include "cgemm/gemm/quantize.hpp"

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

QuantizationDesc current_scaling() {
  QuantizationDesc q;
  q.mode = ScalingMode::kCurrentTensorScaling;
  return q;
}

// Every case's chunks tile its whole GEMM, planned with quantization `q`; returns the number
// of (case, collective, tp, chunks) that split.
int check_tiling(const QuantizationDesc& q) {
  int checked = 0;
  for (const BenchShape& sh : bench_shapes()) {
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      for (int tp : {1, 2, 4, 8}) {
        for (int c : {1, 2, 4}) {
          if (!splits(sh, op, tp, c, q)) {
            EXPECT_THROW(chunked_gemm(sh, op, tp, c, q), Error);
            continue;
          }
          SCOPED_TRACE(sh.name + " " + std::string(collective_name(op)) + " tp " +
                       std::to_string(tp) + " c " + std::to_string(c) + " " + chunk_dtype(q));
          const ChunkedGemm g = chunked_gemm(sh, op, tp, c, q);
          const GemmTask& w = g.whole;
          EXPECT_EQ(g.chunks.size(), static_cast<size_t>(tp * c));
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
              const bool inside =
                  r.lhs_row >= 0 && r.lhs_row < w.m && r.out_row >= 0 && r.out_row < w.m;
              EXPECT_TRUE(inside) << "lhs row " << r.lhs_row << ", out row " << r.out_row;
              if (!inside) continue;
              ++lhs_hits[static_cast<size_t>(r.lhs_row)];
              ++out_hits[static_cast<size_t>(r.out_row)];
            }
          }
          EXPECT_EQ(flops, 2.0 * static_cast<double>(w.m * w.n * w.k));
          // Rows not touched exactly once (counted, so a wrong case reports one line).
          int64_t bad_out = 0, bad_lhs = 0;
          for (int64_t i = 0; i < w.m; ++i) {
            bad_out += out_hits[static_cast<size_t>(i)] != 1;
            bad_lhs += lhs_hits[static_cast<size_t>(i)] != 1;
          }
          EXPECT_EQ(bad_out, 0) << "out rows not written once";
          EXPECT_EQ(bad_lhs, 0) << "lhs rows not read once";
          ++checked;
        }
      }
    }
  }
  return checked;
}

TEST(BenchParts, ChunksTileTheWholeGemmForEveryCase) {
  EXPECT_GT(check_tiling({}), 50);  // most combinations split
}

TEST(BenchParts, Fp8ChunksTileTheWholeGemmForEveryCase) {
  EXPECT_GT(check_tiling(current_scaling()), 50);
}

// With a scaling the chunk GEMMs and the whole GEMM are the FP8 GEMMs runtime/src/
// quantization/quantization.cpp plans: the formats asked, rhs [N, K] contracting its last dim, bf16
// out, fast accumulation as the runtime sets it.
TEST(BenchParts, Fp8ChunksAreTheRuntimesFp8Gemms) {
  QuantizationDesc q = current_scaling();
  q.lhs_format = DType::kFloat8E5M2;  // e5m2 x e4m3: one of gemm.py's FP8 pairs
  EXPECT_EQ(chunk_dtype({}), "bf16");
  EXPECT_EQ(chunk_dtype(current_scaling()), "e4m3 x e4m3");
  EXPECT_EQ(chunk_dtype(q), "e5m2 x e4m3");
  const BenchShape& tiny = bench_shape("tiny");
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    for (int tp : {1, 2, 4}) {
      SCOPED_TRACE(std::string(collective_name(op)) + " tp " + std::to_string(tp));
      const ChunkedGemm g = chunked_gemm(tiny, op, tp, 1, q);
      std::vector<GemmTask> tasks{g.whole};
      for (const ChunkGemm& c : g.chunks) tasks.push_back(c.task);
      for (const GemmTask& t : tasks) {
        EXPECT_TRUE(t.quantized());
        EXPECT_EQ(t.in_dtype, DType::kFloat8E5M2);
        EXPECT_EQ(t.rhs_type(), DType::kFloat8E4M3);
        EXPECT_EQ(t.out_dtype, DType::kBFloat16);
        EXPECT_FALSE(t.lhs_transposed);
        EXPECT_TRUE(t.rhs_transposed);
        EXPECT_EQ(t.ldb, t.k);
        EXPECT_EQ(t.lda, t.k);
        EXPECT_EQ(t.block_scaling, BlockScaling::kTensor);
        EXPECT_EQ(t.fast_accumulation, !fp8_gemm_high_precision_accumulation());
      }
    }
  }
  // Block scaling has no buffers in --parts: refused with the reason.
  q.mode = ScalingMode::kMxfp8_1d;
  EXPECT_FALSE(splits(tiny, CollectiveOp::kAllGather, 2, 1, q));
  EXPECT_NE(why_not_split(tiny, CollectiveOp::kAllGather, 2, 1, q).find("per-tensor FP8"),
            std::string::npos);
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

// The FP8 chunks, run on the CPU on operands quantized as --parts quantizes them (lhs [rows,
// k], rhs [k, n] into [n, k], one scale each), give each bf16 output row the product of its
// lhs row's dequantized values, against fp64; outputs start as NaN.
TEST(BenchParts, Fp8ChunksComputeTheWholeGemmOnTheCpu) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const BenchShape& tiny = bench_shape("tiny");
  const DType fmt = DType::kFloat8E4M3;
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    for (int tp : {1, 2, 4}) {
      for (int c : {1, 2}) {
        if (tp == 1 && c > 1) continue;
        SCOPED_TRACE(std::string(collective_name(op)) + " tp " + std::to_string(tp) + " c " +
                     std::to_string(c));
        const ChunkedGemm g = chunked_gemm(tiny, op, tp, c, current_scaling());
        const int64_t k = g.whole.k, n = g.whole.n;
        std::vector<float> lhs(static_cast<size_t>(g.lhs_elems)),
            rhs(static_cast<size_t>(g.rhs_elems));
        for (float& x : lhs) x = normal(rng);
        for (float& x : rhs) x = normal(rng);
        const quant::TensorScale ls =
            quant::scale_from_amax(quant::amax(lhs.data(), g.lhs_elems), fmt);
        const quant::TensorScale rs =
            quant::scale_from_amax(quant::amax(rhs.data(), g.rhs_elems), fmt);
        std::vector<uint8_t> lq(lhs.size()), rq(rhs.size());
        quant::quantize_tensor(lhs.data(), g.lhs_elems, ls.scale, fmt, lq.data());
        quant::quantize_transpose(rhs.data(), k, n, rs.scale, fmt, rq.data());  // [n, k]
        std::vector<float> ld(lhs.size()), rd(rhs.size());
        quant::dequantize_tensor(lq.data(), g.lhs_elems, ls.scale_inv, fmt, ld.data());
        quant::dequantize_tensor(rq.data(), g.rhs_elems, rs.scale_inv, fmt, rd.data());
        std::vector<uint16_t> out(static_cast<size_t>(g.out_elems), 0x7fc0);  // bf16 NaN
        std::vector<std::pair<int64_t, int64_t>> map;                         // out row <- lhs row
        for (const ChunkGemm& ch : g.chunks) {
          GemmTask t = ch.task;
          t.lhs = lq.data() + ch.lhs_offset;
          t.rhs = rq.data();
          t.out = out.data() + ch.out_offset;
          t.lhs_scale_inv = &ls.scale_inv;
          t.rhs_scale_inv = &rs.scale_inv;
          cpu_gemm(t);
          for (const RowMap& r : rows_of(ch)) map.emplace_back(r.out_row, r.lhs_row);
        }
        ASSERT_EQ(map.size(), static_cast<size_t>(g.whole.m));
        for (const auto& [o, l] : map) {
          for (int64_t j = 0; j < n; ++j) {
            double ref = 0, mag = 0;
            for (int64_t q = 0; q < k; ++q) {
              const double p = static_cast<double>(ld[static_cast<size_t>(l * k + q)]) *
                               rd[static_cast<size_t>(j * k + q)];
              ref += p;
              mag += std::abs(p);
            }
            const float got = numeric::bf16_to_float(out[static_cast<size_t>(o * n + j)]);
            // bf16 output: 2^-8 relative, plus fp32 accumulation over k.
            ASSERT_NEAR(got, ref, 4e-3 * std::abs(ref) + 1e-5 * mag)
                << "out row " << o << " col " << j;
          }
        }
      }
    }
  }
}

// --parts grouped's size rule (parts/grouped_sizes.hpp), the vectors torch_grouped_mm.py
// repeats: sums, empty groups where the rule puts them, the Zipf ranks' sizes, and the
// refusals.
TEST(GroupedSizes, UniformSplitsTheRemainderFirst) {
  EXPECT_EQ(moe_group_sizes(10, 4, GroupSkew::kUniform), (std::vector<int32_t>{3, 3, 2, 2}));
  EXPECT_EQ(moe_group_sizes(32768, 8, GroupSkew::kUniform), std::vector<int32_t>(8, 4096));
  EXPECT_EQ(moe_group_sizes(0, 3, GroupSkew::kUniform), std::vector<int32_t>(3, 0));
}

TEST(GroupedSizes, SkewedHasEightEmptyGroupsAndZipfRanks) {
  for (int64_t tokens : {65536, 16384, 1024, 56}) {
    const std::vector<int32_t> s = moe_group_sizes(tokens, 64, GroupSkew::kSkewed);
    ASSERT_EQ(s.size(), 64u);
    int64_t sum = 0;
    for (size_t g = 0; g < s.size(); ++g) {
      sum += s[g];
      if (g % 8 == 7) {
        EXPECT_EQ(s[g], 0) << "group " << g << " of " << tokens;
      } else {
        EXPECT_GE(s[g], 1) << "group " << g << " of " << tokens;
      }
    }
    EXPECT_EQ(sum, tokens);
  }
  // The figures grouped_sizes.hpp quotes (and torch_grouped_mm.py --dry-run prints).
  const std::vector<int32_t> big = moe_group_sizes(65536, 64, GroupSkew::kSkewed);
  EXPECT_EQ(big[0], 14201);
  EXPECT_EQ(big[1], 7101);
  EXPECT_EQ(big[62], 254);
  const std::vector<int32_t> small = moe_group_sizes(16384, 64, GroupSkew::kSkewed);
  EXPECT_EQ(small[0], 3542);
  EXPECT_EQ(small[62], 64);
  EXPECT_EQ(moe_group_sizes(56, 64, GroupSkew::kSkewed)[0], 1);  // one row per active group
}

TEST(GroupedSizes, Refusals) {
  EXPECT_THROW(moe_group_sizes(100, 0, GroupSkew::kUniform), Error);
  EXPECT_THROW(moe_group_sizes(100, 12, GroupSkew::kSkewed), Error);  // 8 does not divide 12
  EXPECT_THROW(moe_group_sizes(100, 8, GroupSkew::kSkewed), Error);   // every group empty
  EXPECT_THROW(moe_group_sizes(55, 64, GroupSkew::kSkewed), Error);   // fewer tokens than groups
}

}  // namespace
}  // namespace cgemm::launcher::parts
