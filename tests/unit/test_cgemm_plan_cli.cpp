// The cgemm-plan binary itself: the public cases piped through it, its exit statuses,
// --help, and hostile lines (each answered, and the line after it too).

#include <gtest/gtest.h>

#include <sys/wait.h>
#include "sanitizers.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "plan_compare.hpp"

namespace cgemm {
namespace {

using plan::Json;

const std::string kCases = std::string(CGEMM_TEST_DATA_DIR) + "/planner_public.jsonl";

struct RunResult {
  std::string out;
  int status = -1;
};

RunResult run(const std::string& args_and_redirects, const std::string& prefix = "") {
  const std::string cmd = prefix + "\"" + CGEMM_PLAN_BIN + "\" " + args_and_redirects;
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

// The schema names its case files as they are called beside it (it once said `public.jsonl`).
TEST(PlannerCli, SchemaNamesCaseFilesThatExist) {
  const std::string dir = CGEMM_TEST_DATA_DIR;
  std::ifstream in(dir + "/PLANNER_SCHEMA.md");
  ASSERT_TRUE(in) << dir;
  std::stringstream text;
  text << in.rdbuf();
  const std::string schema = text.str();
  const std::regex file_name(R"(`([A-Za-z0-9_.]+\.jsonl)`)");
  int named = 0;
  for (std::sregex_iterator m(schema.begin(), schema.end(), file_name), end; m != end; ++m) {
    ++named;
    EXPECT_TRUE(std::ifstream(dir + "/" + (*m)[1].str()).good()) << (*m)[1] << " is not in " << dir;
  }
  EXPECT_GT(named, 0) << "the schema names no case file";
}

// As cgemm-run's and cgemm-bench's (test_run_config's VersionLine): name, version, commit.
TEST(PlannerCli, VersionLikeTheOtherTools) {
  const RunResult r = run("--version");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(std::regex_match(
      r.out,
      std::regex(R"(cgemm-plan [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]+(-dirty)?|unknown)\)\n)")))
      << r.out;
}

TEST(PlannerCli, HelpNamesTheOpsAndTheSchema) {
  const RunResult r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* word : {"gemm_sharding", "gemm_abstract", "reorder", "grouped_gemm",
                           "PLANNER_SCHEMA.md", "Limits", "1048576 bytes", "256 levels"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(run("--bogus 2>/dev/null").status, 2);
}

// Answers that cannot be written are not lost in silence: one message, exit status 3, and no
// more lines read (exited 0 and printed nothing).
TEST(PlannerCli, LostOutputIsAnError) {
  const std::string input = ::testing::TempDir() + "planner_cli_lost_output.jsonl";
  {
    std::ofstream f(input);
    f << R"({"id":1,"op":"nope"})"
      << "\n"
      << R"({"id":2,"op":"nope"})"
      << "\n";
  }
  // stderr goes to the pipe read here, stdout where the test says.
  for (const char* to : {">/dev/full", ">&-"}) {
    SCOPED_TRACE(to);
    const RunResult r = run("< \"" + input + "\" 2>&1 " + to);
    EXPECT_EQ(r.status, 3);
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_NE(r.out.find("cgemm-plan: cannot write to standard output: "), std::string::npos)
        << r.out;
  }
  const RunResult help = run("--help 2>&1 >/dev/full");
  EXPECT_EQ(help.status, 3);
  EXPECT_NE(help.out.find("cannot write"), std::string::npos) << help.out;
  std::remove(input.c_str());
}

// Standard input that cannot be read (a folder, a closed descriptor): one message, exit status
// 2 (aborted with an uncaught std::ios_base::failure).
TEST(PlannerCli, UnreadableInputIsAnError) {
  for (const std::string& from : {"< \"" + ::testing::TempDir() + "\"", std::string("<&-")}) {
    SCOPED_TRACE(from);
    const RunResult r = run(from + " 2>&1");
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_EQ(r.out.rfind("cgemm-plan: cannot read standard input: ", 0), 0u) << r.out;
  }
}

// --- hostile lines -----------------------------------------------------------------------

// A good line after each hostile one: it must still be answered, exactly so.
const std::string kAfter =
    R"({"id":"after","op":"reorder","kind":"tpsp_leading","shape":[2,2],"dp_size":1,)"
    R"("tpsp_size":2})";
const std::string kAfterAnswer = R"({"id":"after","permutation":[0,2,1,3]})";

// Runs cgemm-plan on `line` then kAfter; the answer lines and the exit status.
struct Answers {
  std::vector<std::string> lines;
  int status = -1;
};

Answers run_hostile(const std::string& line, const std::string& prefix = "") {
  // One file per test: CTest runs the cases of this binary as parallel processes.
  const std::string input = ::testing::TempDir() + "planner_cli_hostile_" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                            ".jsonl";
  {
    std::ofstream f(input, std::ios::binary);
    f << line << '\n' << kAfter << '\n';
  }
  const RunResult r = run("< \"" + input + "\" 2>/dev/null", prefix);
  std::remove(input.c_str());
  Answers a;
  a.status = r.status;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) a.lines.push_back(l);
  return a;
}

// The answer is exactly {"id":<id_text>,"error":"...<needle>..."}.
void expect_error(const std::string& answer, const std::string& id_text,
                  const std::string& needle) {
  const std::string head = "{\"id\":" + id_text + ",\"error\":\"";
  EXPECT_EQ(answer.substr(0, head.size()), head) << answer.substr(0, 300);
  EXPECT_EQ(answer.substr(answer.size() - 2), "\"}") << answer.substr(0, 300);
  EXPECT_NE(answer.find(needle), std::string::npos) << answer.substr(0, 300);
  const Json j = Json::parse(answer, nullptr, false);
  if (!j.is_discarded()) {  // 1e400 does not parse with nlohmann
    EXPECT_EQ(j.size(), 2u) << answer;
    EXPECT_TRUE(j.contains("error")) << answer;
  }
}

void expect_hostile(const std::string& line, const std::string& id_text, const std::string& needle,
                    int status = 0) {
  const Answers a = run_hostile(line);
  EXPECT_EQ(a.status, status);
  ASSERT_EQ(a.lines.size(), 2u) << "every line is answered";
  expect_error(a.lines[0], id_text, needle);
  EXPECT_EQ(a.lines[1], kAfterAnswer);
}

std::string sharding_case(const std::string& id, int64_t lhs_ndim) {
  return R"({"id":)" + id +
         R"(,"op":"gemm_sharding","mesh_resource":{"dp_resource":null,"tp_resource":null,)"
         R"("tpsp_resource":null,"fsdp_resource":null},"lhs":{"ndim":)" +
         std::to_string(lhs_ndim) +
         R"(,"spec":null},"rhs":{"ndim":2,"spec":null},"bias":null,"contracting_dims":[[-1],[0]],)"
         R"("collective_op":"none","scaling_mode":"no_scaling","transpose_batch_sequence":false})";
}

std::string reorder_case(const std::string& id, int64_t rows, int64_t cols) {
  return R"({"id":)" + id + R"(,"op":"reorder","kind":"dp_leading","shape":[)" +
         std::to_string(rows) + "," + std::to_string(cols) + R"(],"dp_size":1,"tpsp_size":2})";
}

std::string nested(const std::string& id, int depth) {
  return R"({"id":)" + id + R"(,"op":"reorder","x":)" + std::string(depth - 1, '[') +
         std::string(depth - 1, ']') + "}";
}

TEST(PlannerCliHostile, NumberBeyondADoubleInTheId) {
  expect_hostile(R"({"id":1e400,"op":"reorder"})", "1e400", "out of the range of a double");
}

TEST(PlannerCliHostile, NumberBeyondADoubleInAnIgnoredField) {
  expect_hostile(R"({"id":"big","category":-1e400,"op":"reorder"})", "\"big\"",
                 "out of the range of a double");
  // Before the id: the id is still recovered from the text.
  expect_hostile(R"({"category":[2e308],"id":7})", "7", "out of the range of a double");
}

TEST(PlannerCliHostile, NestingBeyondTheDepthLimit) {
  // About 48,000 levels in a 95 KB line overflowed the stack.
  const std::string deep = nested("\"deep\"", 48'000);
  EXPECT_GT(deep.size(), 95'000u);
  expect_hostile(deep, "\"deep\"", "depth limit (256 levels)");
  expect_hostile(nested("3", plan::kMaxDepth + 1), "3", "depth limit (256 levels)");
  // At the limit the case is parsed (and refused for its op alone).
  const Answers a = run_hostile(nested("4", plan::kMaxDepth));
  ASSERT_EQ(a.lines.size(), 2u);
  expect_error(a.lines[0], "4", "missing field 'kind'");
  // Deep but not JSON: a not-JSON answer, status 1.
  expect_hostile(R"({"id":5,"x":)" + std::string(1000, '[') + "}", "null", "is not JSON", 1);
}

TEST(PlannerCliHostile, NulByteIsNotJson) {
  // The parser took the NUL for the end of the line and answered the case before it.
  const std::string ok = R"({"id":"x","op":"reorder","kind":"tpsp_leading","shape":[4,2,3],)"
                         R"("dp_size":2,"tpsp_size":2})";
  expect_hostile(ok + std::string(1, '\0') + " junk", "null", "a NUL byte at byte 90", 1);
}

TEST(PlannerCliHostile, HugeNdimIsRefusedAtTheCap) {
  // Took 27 s and 6 GB and answered with a 300 MB line.
  const std::string line = sharding_case("\"ndim\"", 50'000'000);
  EXPECT_LT(line.size(), 400u);
  expect_hostile(line, "\"ndim\"", "'lhs.ndim' is 50000000, more than the ndim limit (1024)");
  expect_hostile(sharding_case("1", plan::kMaxNdim + 1), "1", "ndim limit (1024)");
  const Answers a = run_hostile(sharding_case("2", plan::kMaxNdim));
  ASSERT_EQ(a.lines.size(), 2u);
  EXPECT_EQ(a.lines[0].find("error"), std::string::npos) << a.lines[0].substr(0, 300);
}

TEST(PlannerCliHostile, LongShapesAndSpecsAreRefusedAtTheCap) {
  std::string shape = "[1";
  for (int i = 0; i < plan::kMaxNdim; ++i) shape += ",1";
  expect_hostile(R"({"id":1,"op":"reorder","kind":"dp_leading","shape":)" + shape +
                     R"(],"dp_size":1,"tpsp_size":1})",
                 "1", "'shape' has 1025 entries, more than the ndim limit (1024)");
}

TEST(PlannerCliHostile, ReorderBeyondTheElementCap) {
  // 2^26 elements, the former cap, printed 593 MB.
  expect_hostile(reorder_case("\"r\"", 8192, 8192), "\"r\"",
                 "67108864 elements, too many to list a permutation: more than the reorder "
                 "element limit (1048576)");
  // At the cap: answered in full.
  const Answers a = run_hostile(reorder_case("\"cap\"", 1024, 1024));
  EXPECT_EQ(a.status, 0);
  ASSERT_EQ(a.lines.size(), 2u);
  EXPECT_EQ(a.lines[0].rfind(R"({"id":"cap","permutation":[0,1,2,)", 0), 0u);
  EXPECT_LT(a.lines[0].size(), plan::kMaxAnswerBytes);
  EXPECT_EQ(a.lines[1], kAfterAnswer);
}

// A reorder at its element cap under a low address-space limit: the permutation, or an
// out-of-memory error with the case's id, and the next line answered (aborted with
// std::bad_alloc at 40-80 MB: destroying the permutation's JSON array allocates).
TEST(PlannerCliHostile, ReorderAtTheCapUnderAnAddressSpaceLimit) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit allows";
  }
  for (const int kib : {40'000, 50'000, 60'000, 70'000, 80'000}) {
    SCOPED_TRACE(kib);
    const Answers a =
        run_hostile(reorder_case("\"cap\"", 1024, 1024), "ulimit -v " + std::to_string(kib) + "; ");
    EXPECT_EQ(a.status, 0);
    ASSERT_EQ(a.lines.size(), 2u) << "every line is answered";
    if (a.lines[0].rfind(R"({"id":"cap","permutation":[0,1,2,)", 0) != 0) {
      expect_error(a.lines[0], "\"cap\"", "out of memory");
    }
    EXPECT_EQ(a.lines[1], kAfterAnswer);
  }
}

TEST(PlannerCliHostile, IdsAreCopiedAsTheirText) {
  for (const char* id :
       {"123456789012345678901234567890", "-9223372036854775809", "18446744073709551616",
        "9223372036854775807", "-0", "1.0", "1E2", "0.1000000000000000055511151231257827"}) {
    SCOPED_TRACE(id);
    expect_hostile(std::string(R"({"op":"x","id":)") + id + "}", id, "unknown op 'x'");
  }
  // A duplicate id: the last one counts, as it does for the parser.
  expect_hostile(R"({"id":1,"id":123456789012345678901234567890,"op":"x"})",
                 "123456789012345678901234567890", "unknown op 'x'");
}

TEST(PlannerCliHostile, LineBeyondTheLengthLimit) {
  const std::string line =
      R"({"id":99,"x":")" + std::string(plan::kMaxLineBytes, 'a') + R"(","op":"reorder"})";
  expect_hostile(line, "99", "line length limit (1048576 bytes)", 1);
}

TEST(PlannerCliHostile, OutOfMemoryIsAnswered) {
  if (kUnderAddressSanitizer) {
    GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit allows";
  }
  // About 1 MB of empty arrays takes far more memory as parsed values (about 30 MB) than the
  // address space `ulimit -v` leaves beside the program and its reserve (about 25 MB).
  std::string line = R"({"id":"oom","x":[)";
  while (line.size() < plan::kMaxLineBytes - 100) line += "[],";
  line += "[]]}";
  const Answers a = run_hostile(line, "ulimit -v 33000; ");
  EXPECT_EQ(a.status, 0);
  ASSERT_EQ(a.lines.size(), 2u);
  expect_error(a.lines[0], "\"oom\"", "out of memory");
  EXPECT_EQ(a.lines[1], kAfterAnswer);
}

}  // namespace
}  // namespace cgemm
