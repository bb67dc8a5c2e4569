// core/: env_flag / env_int (one rule for every environment variable) and num_elements'
// checked 64-bit arithmetic.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../support/error_of.hpp"
#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/launch_env.hpp"
#include "cgemm/core/shape.hpp"

namespace cgemm {
namespace {

constexpr const char* kVar = "CGEMM_TEST_CORE_ENV";
constexpr EnvKnob kKnob{kVar, "unset", "test_core's own variable"};

// Sets kVar for one test and unsets it afterwards.
class EnvTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kVar); }
  static void set(const char* value) { setenv(kVar, value, 1); }
};

using test::error_of;

TEST_F(EnvTest, FlagUnsetOrEmptyIsNullopt) {
  unsetenv(kVar);
  EXPECT_EQ(env_flag(kKnob), std::nullopt);
  set("");
  EXPECT_EQ(env_flag(kKnob), std::nullopt);
}

TEST_F(EnvTest, FlagTrueValuesInAnyCase) {
  for (const char* v : {"1", "on", "ON", "On", "true", "TRUE", "True", "yes", "YES", "yEs"}) {
    set(v);
    EXPECT_EQ(env_flag(kKnob), true) << v;
  }
}

TEST_F(EnvTest, FlagFalseValuesInAnyCase) {
  for (const char* v : {"0", "off", "OFF", "false", "False", "FALSE", "no", "NO", "No"}) {
    set(v);
    EXPECT_EQ(env_flag(kKnob), false) << v;
  }
}

TEST_F(EnvTest, FlagGarbageThrowsNamingVariableAndValue) {
  for (const char* v : {"2", "y", "enable", "true ", " 1", "nope"}) {
    set(v);
    const std::string msg = error_of([] { (void)env_flag(kKnob); });
    EXPECT_NE(msg.find(kVar), std::string::npos) << v << ": " << msg;
    EXPECT_NE(msg.find(std::string("'") + v + "'"), std::string::npos) << v << ": " << msg;
  }
}

TEST_F(EnvTest, IntParsesWholeDecimalIntegers) {
  unsetenv(kVar);
  EXPECT_EQ(env_int(kKnob), std::nullopt);
  set("");
  EXPECT_EQ(env_int(kKnob), std::nullopt);
  set("42");
  EXPECT_EQ(env_int(kKnob), 42);
  set("-7");
  EXPECT_EQ(env_int(kKnob), -7);
  set("9223372036854775807");
  EXPECT_EQ(env_int(kKnob), std::numeric_limits<long long>::max());
}

TEST_F(EnvTest, IntGarbageOrOutOfRangeThrowsNamingVariableAndValue) {
  for (const char* v : {"abc", "12x", "1.5", "0x10", "99999999999999999999"}) {
    set(v);
    const std::string msg = error_of([] { (void)env_int(kKnob); });
    EXPECT_NE(msg.find(kVar), std::string::npos) << v << ": " << msg;
    EXPECT_NE(msg.find(v), std::string::npos) << v << ": " << msg;
  }
}

TEST(CoreShape, NumElements) {
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(num_elements({4, 8192, 4096}), int64_t{4} * 8192 * 4096);
  EXPECT_EQ(num_elements({3, 0, 5}), 0);
  EXPECT_EQ(num_elements({std::numeric_limits<int64_t>::max()}),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(num_elements({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
}

TEST(CoreShape, NumElementsOverflowThrows) {
  const std::string msg = error_of([] {
    (void)num_elements({int64_t{1} << 32, int64_t{1} << 32});
  });
  EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4294967296, 4294967296]"), std::string::npos) << msg;
  EXPECT_THROW(num_elements({std::numeric_limits<int64_t>::max(), 2}), Error);
  EXPECT_THROW(num_elements({1 << 21, 1 << 21, 1 << 21}), Error);  // 2^63
}

TEST(CoreShape, NegativeDimThrows) {
  const std::string msg = error_of([] { (void)num_elements({4, -1, 8}); });
  EXPECT_NE(msg.find("negative"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, -1, 8]"), std::string::npos) << msg;
  EXPECT_THROW(num_elements({-2, -3}), Error);  // the product would be positive
  EXPECT_THROW(num_elements({0, -1}), Error);
}

// NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION is Transformer Engine's, parsed as TE does (the
// text compared with "1"): values env_flag refuses, such as 2, must not throw.
// gemm.py's CollectiveOpSet.create: the backward collective transposes the forward one.
TEST(CoreCollectiveOpSet, CreatePairsEachForwardWithItsTranspose) {
  using cgemm::CollectiveOp;
  using cgemm::CollectiveOpSet;
  const CollectiveOpSet ag = CollectiveOpSet::create(CollectiveOp::kAllGather);
  EXPECT_EQ(ag.forward, CollectiveOp::kAllGather);
  EXPECT_EQ(ag.backward, CollectiveOp::kReduceScatter);
  const CollectiveOpSet rs = CollectiveOpSet::create(CollectiveOp::kReduceScatter);
  EXPECT_EQ(rs.forward, CollectiveOp::kReduceScatter);
  EXPECT_EQ(rs.backward, CollectiveOp::kAllGather);
  const CollectiveOpSet none = CollectiveOpSet::create(CollectiveOp::kNone);
  EXPECT_EQ(none.forward, CollectiveOp::kNone);
  EXPECT_EQ(none.backward, CollectiveOp::kNone);
  EXPECT_EQ(none, cgemm::kNoopCollectiveOpSet);
  EXPECT_NE(ag, rs);
  // Usable where a constant is needed (a layer's static description).
  static_assert(CollectiveOpSet::create(CollectiveOp::kReduceScatter).backward ==
                CollectiveOp::kAllGather);
}

TEST(EnvFp8Accumulation, OnlyExactlyOneMeansHighPrecision) {
  const char* name = "NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION";
  unsetenv(name);
  EXPECT_FALSE(fp8_gemm_high_precision_accumulation());
  setenv(name, "1", 1);
  EXPECT_TRUE(fp8_gemm_high_precision_accumulation());
  for (const char* v : {"0", "2", "true", "yes", "on", " 1", "1 ", "01", ""}) {
    setenv(name, v, 1);
    bool on = true;
    EXPECT_NO_THROW(on = fp8_gemm_high_precision_accumulation()) << v;
    EXPECT_FALSE(on) << "'" << v << "'";
  }
  unsetenv(name);
}

// foreign_launcher_problem: torchrun's variables against a 1-rank MPI world. Each test starts
// with every variable it reads unset and leaves them so.
class LaunchEnvTest : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"WORLD_SIZE",      "RANK",
                                          "LOCAL_RANK",      "LOCAL_WORLD_SIZE",
                                          "PMI_SIZE",        "OMPI_COMM_WORLD_SIZE",
                                          "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"};
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(LaunchEnvTest, TorchrunProcessOfSeveralIsRefused) {
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "1", 1);
  setenv("LOCAL_RANK", "1", 1);
  const std::optional<std::string> problem = foreign_launcher_problem(1);
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("WORLD_SIZE=2, RANK=1, LOCAL_RANK=1"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("start them with mpirun or srun"), std::string::npos) << *problem;
  // Rank 0 of such a launch says so through WORLD_SIZE alone; LOCAL_RANK alone is enough too.
  setenv("RANK", "0", 1);
  setenv("LOCAL_RANK", "0", 1);
  EXPECT_TRUE(foreign_launcher_problem(1).has_value());
  unsetenv("WORLD_SIZE");
  unsetenv("RANK");
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_TRUE(foreign_launcher_problem(1).has_value());
}

TEST_F(LaunchEnvTest, AgreeingOrMpiLaunchedIsAccepted) {
  EXPECT_FALSE(foreign_launcher_problem(1).has_value());  // nothing set: a plain 1-rank run
  setenv("WORLD_SIZE", "1", 1);  // torchrun --nproc_per_node 1: one process, one rank
  setenv("RANK", "0", 1);
  setenv("LOCAL_RANK", "0", 1);
  EXPECT_FALSE(foreign_launcher_problem(1).has_value());
  setenv("WORLD_SIZE", "4", 1);
  EXPECT_FALSE(foreign_launcher_problem(4).has_value());  // MPI's world is several: MPI launched
  EXPECT_FALSE(foreign_launcher_problem(2).has_value());
  setenv("WORLD_SIZE", "two", 1);  // not a number: not judged
  EXPECT_FALSE(foreign_launcher_problem(1).has_value());
  setenv("WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "1", 1);  // mpirun -np 1 in a shell that kept WORLD_SIZE
  EXPECT_FALSE(foreign_launcher_problem(1).has_value());
}

// docs/ENVIRONMENT.md's table (the README links it) lists exactly the registry's knobs, each
// with the default the registry gives; the knobs have distinct names.
TEST(EnvRegistry, DocumentedTableIsTheRegistry) {
  std::ifstream in(std::string(CGEMM_SOURCE_DIR) + "/docs/ENVIRONMENT.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string page = text.str();
  const size_t at = page.find("# Environment variables");
  ASSERT_NE(at, std::string::npos);
  const std::string section = page.substr(at, page.find("\n## ", at) - at);
  std::set<std::string> names;
  for (const EnvKnob* k : kEnvKnobs) {
    EXPECT_TRUE(names.insert(std::string(k->name)).second) << k->name;
    const std::string row = "| `" + std::string(k->name) + "` | " + std::string(k->default_text) +
                            " | " + std::string(k->meaning) + " |";
    EXPECT_NE(section.find(row), std::string::npos) << "docs/ENVIRONMENT.md lacks the row " << row;
  }
  size_t rows = 0;
  for (size_t p = section.find("\n| `"); p != std::string::npos; p = section.find("\n| `", p + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, kEnvKnobs.size()) << "docs/ENVIRONMENT.md lists a variable the registry does not";

  // Every knob declared in the header is in the registry (a row left out of kEnvKnobs would
  // escape the table).
  std::ifstream hin(std::string(CGEMM_SOURCE_DIR) + "/core/include/cgemm/core/env.hpp");
  std::stringstream header;
  header << hin.rdbuf();
  const std::string h = header.str();
  size_t declared = 0;
  for (size_t p = h.find("inline constexpr EnvKnob "); p != std::string::npos;
       p = h.find("inline constexpr EnvKnob ", p + 1)) {
    ++declared;
  }
  EXPECT_EQ(declared, kEnvKnobs.size());
}

}  // namespace
}  // namespace cgemm
