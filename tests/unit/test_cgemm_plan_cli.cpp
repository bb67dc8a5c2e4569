// The cgemm-plan binary itself: the public cases piped through it, its exit statuses and
// --help.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include "plan_compare.hpp"

namespace cgemm {
namespace {

using plan::Json;

const std::string kCases = std::string(CGEMM_TEST_DATA_DIR) + "/planner_public.jsonl";

struct RunResult {
  std::string out;
  int status = -1;
};

RunResult run(const std::string& args_and_redirects) {
  const std::string cmd = std::string("\"") + CGEMM_PLAN_BIN + "\" " + args_and_redirects;
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

TEST(PlannerCli, PublicCasesThroughTheBinary) {
  // The binary reads the file with every case's "expected" wrapper; feed it the cases alone.
  const auto cases = plan::test::load_cases(kCases);
  ASSERT_FALSE(cases.empty());
  const std::string input = ::testing::TempDir() + "planner_cli_cases.jsonl";
  {
    std::ofstream f(input);
    for (const auto& c : cases) f << c.input.dump() << "\n\n";  // blank lines are skipped
  }
  const RunResult r = run("< \"" + input + "\"");
  EXPECT_EQ(r.status, 0);
  std::istringstream lines(r.out);
  std::string line, failures;
  size_t i = 0, failed = 0;
  for (; std::getline(lines, line); ++i) {
    if (i >= cases.size()) break;
    const std::string why = plan::test::compare_answer(cases[i].expected, Json::parse(line));
    if (!why.empty()) {
      ++failed;
      failures += "  " + cases[i].input.at("id").dump() + ": " + why + "\n";
    }
  }
  EXPECT_EQ(i, cases.size()) << "one answer line per case";
  EXPECT_EQ(failed, 0u) << failures;
  std::remove(input.c_str());
}

TEST(PlannerCli, NonJsonInputGivesNonZeroExit) {
  const RunResult r = run("2>/dev/null <<'EOF'\n{\"id\":1,\"op\":\"nope\"}\nnot json\nEOF");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

TEST(PlannerCli, HelpNamesTheOpsAndTheSchema) {
  const RunResult r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* word : {"gemm_sharding", "gemm_abstract", "reorder", "SCHEMA.md"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(run("--bogus 2>/dev/null").status, 2);
}

}  // namespace
}  // namespace cgemm
