// Replays the fuzz targets' saved inputs (tests/fuzz/regressions/<target>/: minimized crashes
// and the hostile inputs of the planner's limits), their seeds and their committed corpus
// (tests/fuzz/corpus/<target>/) through the targets' checks, without libFuzzer, in every
// build.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_checks.hpp"

namespace cgemm::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext = "") {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && (ext.empty() || e.path().extension() == ext)) {
      files.push_back(e.path());
    }
  }
  return files;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

template <typename Check>
void replay(const std::vector<fs::path>& files, Check check) {
  for (const auto& p : files) {
    const std::string data = read(p);
    EXPECT_EQ(check(reinterpret_cast<const uint8_t*>(data.data()), data.size()), "")
        << p.filename();
  }
}

const fs::path kFuzz = fs::path(CGEMM_SOURCE_DIR) / "tests" / "fuzz";

TEST(FuzzRegressions, PlanLine) {
  const auto files = files_in(kFuzz / "regressions" / "plan_line");
  EXPECT_FALSE(files.empty());
  replay(files, check_plan_lines);
}

TEST(FuzzRegressions, PlanLineOnThePublicCases) {
  const std::string cases = read(fs::path(CGEMM_SOURCE_DIR) / "tests/data/planner_public.jsonl");
  ASSERT_FALSE(cases.empty());
  EXPECT_EQ(check_plan_lines(reinterpret_cast<const uint8_t*>(cases.data()), cases.size()), "");
}

TEST(FuzzRegressions, PlanLineOnTheCorpus) {
  const auto files = files_in(kFuzz / "corpus" / "plan_line");
  EXPECT_FALSE(files.empty());
  replay(files, check_plan_lines);
}

// The answer check itself, so that a target that cannot fail is noticed.
TEST(FuzzRegressions, PlanAnswerCheck) {
  EXPECT_EQ(check_plan_answer(R"({"id":1,"error":"no"})"), "");
  EXPECT_EQ(check_plan_answer(R"({"id":"a","plan":{"error":""},"n":[1,{}]})"), "");
  // A number beyond a double ends the check (the parser stops there): the rest is not read.
  EXPECT_EQ(check_plan_answer(R"({"id":1e999,"error":""})"), "");
  EXPECT_NE(check_plan_answer(R"({"id":1,"error":""})"), "");
  EXPECT_NE(check_plan_answer(R"({"id":1,"error":7})"), "");
  EXPECT_NE(check_plan_answer(R"({"id":1,"error":{"a":"b"}})"), "");
  EXPECT_NE(check_plan_answer(R"({"id":1,"error":"no","plan":1})"), "");
  EXPECT_NE(check_plan_answer(R"({"id":1,"error":"no","error":""})"), "");
  EXPECT_NE(check_plan_answer(R"({"plan":1,"id":1})"), "");
  EXPECT_NE(check_plan_answer(R"({"id":1,)"), "");
  EXPECT_NE(check_plan_answer(R"([1])"), "");
}

TEST(FuzzRegressions, RunConfig) {
  replay(files_in(kFuzz / "regressions" / "run_config"), check_run_config);
}

TEST(FuzzRegressions, RunConfigOnTheShippedConfigs) {
  const auto files = files_in(fs::path(CGEMM_SOURCE_DIR) / "configs", ".ini");
  EXPECT_FALSE(files.empty());
  replay(files, check_run_config);
}

TEST(FuzzRegressions, RunConfigOnTheCorpus) {
  const auto files = files_in(kFuzz / "corpus" / "run_config");
  EXPECT_FALSE(files.empty());
  replay(files, check_run_config);
}

}  // namespace
}  // namespace cgemm::fuzz
