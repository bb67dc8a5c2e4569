// cgemm-bench's figures and words: nccl-tests' bytes, algbw and busbw
// (launcher/bench/collective_bandwidth), the digits small rates keep (table.hpp's significant),
// --help's shape sizes and bandwidth definitions.

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "bench/bench_config.hpp"
#include "bench/collective_bandwidth.hpp"
#include "cgemm/core/error.hpp"
#include "common/table.hpp"

namespace cgemm::launcher {
namespace {

TEST(CollectiveBandwidth, BytesAreNcclTestsWholeArray) {
  // All-gather: each rank's input x tp (the gathered output); reduce-scatter: each rank's
  // output x tp (one rank's input).
  EXPECT_EQ(collective_bytes(CollectiveOp::kAllGather, 8192, 2), 16384);
  EXPECT_EQ(collective_bytes(CollectiveOp::kReduceScatter, 1000, 8), 8000);
  EXPECT_EQ(ring_bytes_per_rank(CollectiveOp::kAllGather, 16384, 2), 8192);
  EXPECT_EQ(ring_bytes_per_rank(CollectiveOp::kReduceScatter, 8000, 8), 7000);
  EXPECT_EQ(ring_bytes_per_rank(CollectiveOp::kAllGather, 4096, 1), 0);
  EXPECT_THROW(collective_bytes(CollectiveOp::kNone, 1, 2), Error);
}

TEST(CollectiveBandwidth, AlgbwAndBusbwFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllGather, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllGather, 1), 0.0);
  // 1 GB in 1 s: 1 GB/s (1e9 bytes, not GiB).
  EXPECT_DOUBLE_EQ(algbw_gb_s(1'000'000'000, 1000.0), 1.0);
  EXPECT_DOUBLE_EQ(algbw_gb_s(268'435'456, 2.0), 134.217728);
  EXPECT_DOUBLE_EQ(busbw_gb_s(CollectiveOp::kReduceScatter, 4, 400'000'000, 1.0), 300.0);
  EXPECT_DOUBLE_EQ(busbw_gb_s(CollectiveOp::kAllGather, 8, 800'000'000, 1.0), 700.0);
  EXPECT_DOUBLE_EQ(algbw_gb_s(1024, 0.0), 0.0);  // no time measured: no figure, not inf
  EXPECT_THROW(bus_factor(CollectiveOp::kAllGather, 0), Error);
}

TEST(FormatDouble, SignificantDigitsShowSmallRates) {
  EXPECT_EQ(format_double(0.0161, 1), "0.0");  // what TFLOP/s printed on CPUs before
  EXPECT_EQ(format_double(0.0161, 1, 3), "0.0161");
  EXPECT_EQ(format_double(0.00231, 1, 3), "0.00231");
  EXPECT_EQ(format_double(2.0534, 1, 3), "2.05");
  EXPECT_EQ(format_double(612.345, 1, 3), "612.3");  // a GPU's figure keeps its precision
  EXPECT_EQ(format_double(0.0, 1, 3), "0.0");
  EXPECT_EQ(format_double(-0.5, 1, 3), "-0.500");
}

TEST(FormatDouble, TableColumnKeepsSignificantDigits) {
  Table t({{"tflops", "TFLOP/s", "TFLOP/s", 1, 1, "", Column::kAll, 3},
           {"ms", "", "", 3, -1, "", Column::kAll}});
  t.add({0.0161, 0.5});
  t.add({612.345, 0.0001});
  EXPECT_EQ(t.csv(), "tflops,ms\n0.0161,0.500\n612.3,0.000\n");
  EXPECT_NE(t.markdown().find("| 0.0161 | 0.500 |"), std::string::npos) << t.markdown();
}

// --help's text with its line wraps and indents as single spaces.
std::string bench_help() {
  const char* argv[] = {"cgemm-bench", "--help"};
  const std::string h = parse_bench_config(2, argv).help_text;
  return std::regex_replace(h, std::regex("\\s+"), " ");
}

TEST(BenchHelp, ListsEveryCaseWithItsSizes) {
  const std::string h = bench_help();
  for (const BenchShape& s : bench_shapes()) {
    const std::string sizes = s.name + " (batch " + std::to_string(s.batch) + ", seq " +
                              std::to_string(s.seq) + ", AG " + std::to_string(s.ag_in) + "->" +
                              std::to_string(s.ag_out) + ", RS " + std::to_string(s.rs_in) + "->" +
                              std::to_string(s.rs_out);
    EXPECT_NE(h.find(sizes), std::string::npos) << sizes << "\n" << h;
  }
  EXPECT_NE(h.find("tiny (batch 2, seq 64, AG 64->128, RS 128->64; for tests on CPUs)"),
            std::string::npos);
}

TEST(BenchHelp, DefinesTheBandwidthsAndOut) {
  const std::string h = bench_help();
  for (const char* words :
       {"GB/s (1e9 bytes/s)", "algbw = bytes / collective-alone time", "busbw = algbw x (tp-1)/tp",
        "the all-gather's gathered output", "the reduce-scatter's input on one rank",
        "created, with its parents, when missing"}) {
    EXPECT_NE(h.find(words), std::string::npos) << words << "\n" << h;
  }
}

}  // namespace
}  // namespace cgemm::launcher
