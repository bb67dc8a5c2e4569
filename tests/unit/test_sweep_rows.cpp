// cgemm-run's sweep rows (launcher/run/sweep_rows.cpp): every sweepable option has a column in the
// CSV and JSON Lines rows, swept or not; JSON values keep the option's type; the sweep's
// config is printed once with its lists; an experiment's line is one line.

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/run_config.hpp"
#include "run/sweep_rows.hpp"

namespace cgemm::launcher {
namespace {

ParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cgemm-run");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_run_config(static_cast<int>(argv.size()), argv.data());
}

std::vector<std::string> csv_fields(std::string line) {
  if (!line.empty() && line.back() == '\n') line.pop_back();
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, ',');) out.push_back(f);
  return out;
}

// A table of the sweep `args` with one row per experiment (results made up).
Table rows_of(const ParseResult& p) {
  Table t = sweep_table(p.swept);
  for (size_t i = 0; i < p.experiments.size(); ++i) {
    SweepResult r;
    r.backend = "cpu";
    r.overlapped_ms = 1.0;
    r.sequential_ms = 2.0;
    r.check = "PASSED";
    t.add(sweep_row(i, p.labels[i], p.experiments[i], r));
  }
  return t;
}

TEST(SweepRows, EverySweepableOptionHasAColumnInEveryRow) {
  const ParseResult p = parse({"--seq_len", "16,32", "--hidden_in", "32", "--hidden_out", "48"});
  const Table t = rows_of(p);
  const std::vector<std::string> header = csv_fields(t.csv_header());
  for (std::string_view name : run_sweepable_options()) {
    EXPECT_NE(std::find(header.begin(), header.end(), name), header.end())
        << "no CSV column for the sweepable option " << name;
    for (size_t i = 0; i < t.size(); ++i) {
      const auto j = nlohmann::json::parse(t.json_line(i));
      EXPECT_TRUE(j.contains(std::string(name))) << "row " << i << " lacks " << name;
      EXPECT_EQ(csv_fields(t.csv_row(i)).size(), header.size());
    }
  }
}

TEST(SweepRows, JsonValuesKeepTheirTypes) {
  const ParseResult p = parse({"--dtype", "bf16,fp16", "--hidden_in", "512", "--hidden_out", "48",
                               "--std", "0.023", "--bias", "off", "--chunks_per_rank", "2"});
  const Table t = rows_of(p);
  ASSERT_EQ(t.size(), 2u);
  const auto j = nlohmann::json::parse(t.json_line(1));
  EXPECT_TRUE(j["hidden_in"].is_number_integer()) << j.dump();
  EXPECT_EQ(j["hidden_in"], 512);
  EXPECT_TRUE(j["batch"].is_number_integer());
  EXPECT_TRUE(j["chunks_per_rank"].is_number_integer()) << j.dump();
  EXPECT_EQ(j["chunks_per_rank"], 2);
  EXPECT_TRUE(j["bias"].is_boolean()) << j.dump();
  EXPECT_EQ(j["bias"], false);
  EXPECT_TRUE(j["check"].is_boolean());
  EXPECT_TRUE(j["std"].is_number_float()) << j.dump();
  EXPECT_DOUBLE_EQ(j["std"].get<double>(), 0.023);
  EXPECT_TRUE(j["seed"].is_number_integer());
  EXPECT_EQ(j["dtype"], "float16");
  EXPECT_TRUE(j["overlap"].is_string());  // auto | on | off: a word, not a boolean
  EXPECT_TRUE(j["collective"].is_string());
  // The CSV prints numbers as given, not rounded to the table's digits.
  const std::vector<std::string> header = csv_fields(t.csv_header());
  const std::vector<std::string> row = csv_fields(t.csv_row(1));
  const auto at = std::find(header.begin(), header.end(), "std") - header.begin();
  EXPECT_EQ(row[static_cast<size_t>(at)], "0.023");
}

TEST(SweepRows, ABlockOfSeveralGemmsJoinsItsSizes) {
  const ParseResult p = parse({"--gemm", "up all_gather 32 64", "--gemm",
                               "down reduce_scatter 64 32", "--seq_len", "16,32"});
  const auto j = nlohmann::json::parse(rows_of(p).json_line(0));
  EXPECT_EQ(j["hidden_in"], "32+64");
  EXPECT_EQ(j["collective"], "all_gather+reduce_scatter");
}

TEST(SweepRows, ConfigPrintedOnceWithTheLists) {
  const ParseResult p =
      parse({"--seq_len", "16,32", "--dtype", "bf16,fp16", "--hidden_in", "32,64"});
  const std::string ini = sweep_ini(p.experiments, p.swept);
  EXPECT_NE(ini.find("\nseq_len = 16, 32\n"), std::string::npos) << ini;
  EXPECT_NE(ini.find("\ndtype = bfloat16, float16\n"), std::string::npos) << ini;
  EXPECT_NE(ini.find("\nhidden_in = 32, 64\n"), std::string::npos) << ini;
  EXPECT_EQ(ini.find("\nseq_len = 16\n"), std::string::npos) << ini;
}

TEST(SweepRows, AnExperimentIsOneLine) {
  SweepResult r;
  r.overlapped_ms = 0.5;
  r.sequential_ms = 1.0;
  r.check = "PASSED";
  const std::string line = experiment_line(1, 4, "seq_len=32", r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.rfind("experiment 2/4: seq_len=32: ", 0), 0u) << line;
  EXPECT_NE(line.find("speed-up 2.00x, check PASSED"), std::string::npos) << line;
}

}  // namespace
}  // namespace cgemm::launcher
