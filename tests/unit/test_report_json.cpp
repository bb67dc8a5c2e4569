// launcher/common/report_json: the report's specs, options and provenance in JSON's own types.

#include "common/report_json.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>

namespace cgemm::launcher {
namespace {

using nlohmann::json;

TEST(ReportJson, SpecsAreArraysWithNullAndNestedTuples) {
  const PartitionSpec spec{SpecEntry::axis("dp"), SpecEntry::none(),
                           SpecEntry::tuple({"tpsp", "fsdp"})};
  EXPECT_EQ(spec_json(spec), json::parse(R"(["dp", null, ["tpsp", "fsdp"]])"));
  EXPECT_EQ(spec_json({}), json::array());
}

TEST(ReportJson, ConfigIsAnObjectOfTypedValues) {
  RunConfig cfg;
  cfg.batch = 4;
  cfg.bias = false;
  cfg.dtype = DType::kFloat16;
  cfg.seed = 18446744073709551615ull;  // beyond int64
  cfg.report = "123";                  // a path that looks like a number stays text
  cfg.config_file = "run.ini";
  cfg.gemms = {{"up", CollectiveOp::kAllGather, 32, 64},
               {"down", CollectiveOp::kReduceScatter, 64, 32}};
  const json c = config_json(cfg);
  ASSERT_TRUE(c.is_object()) << c.dump();
  EXPECT_EQ(c["batch"], 4);
  EXPECT_EQ(c["bias"], false);
  EXPECT_EQ(c["check"], true);
  EXPECT_EQ(c["dtype"], "float16");
  EXPECT_EQ(c["seed"], 18446744073709551615ull);
  EXPECT_EQ(c["std"], 0.023);
  EXPECT_EQ(c["tp"], 0);  // its INI note ("# world size / dp") is not part of the value
  EXPECT_EQ(c["overlap"], "auto");
  EXPECT_EQ(c["report"], "123");
  EXPECT_TRUE(c["trace"].is_null());
  EXPECT_EQ(c["config"], "run.ini");
  EXPECT_EQ(c["gemm"], json::parse(R"([
    {"name": "up", "collective": "all_gather", "hidden_in": 32, "hidden_out": 64},
    {"name": "down", "collective": "reduce_scatter", "hidden_in": 64, "hidden_out": 32}])"));
  // The block is there once, as "gemm", not also as the single GEMM's options.
  EXPECT_FALSE(c.contains("collective"));
  EXPECT_FALSE(c.contains("hidden_in"));
}

TEST(ReportJson, ConfigHasEveryOptionTheIniWrites) {
  const RunConfig cfg;
  const json c = config_json(cfg);
  for (const auto& row : run_rows()) {
    if (!row.ini || row.name == "gemm") continue;
    EXPECT_TRUE(c.contains(row.name)) << row.name;
  }
  EXPECT_TRUE(c["config"].is_null());
}

TEST(ReportJson, ProvenanceHasVersionCommitAndUtcTime) {
  const json p = provenance_json();
  EXPECT_TRUE(std::regex_match(p["version"].get<std::string>(), std::regex(R"(\d+\.\d+\.\d+)")));
  EXPECT_TRUE(std::regex_match(p["commit"].get<std::string>(),
                               std::regex(R"([0-9a-f]+(-dirty)?|unknown)")));
  EXPECT_TRUE(std::regex_match(p["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
}

}  // namespace
}  // namespace cgemm::launcher
