// core/: env_flag / env_int (one rule for every environment variable) and num_elements'
// checked 64-bit arithmetic.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "cgemm/core/collective_op.hpp"
#include "cgemm/core/env.hpp"
#include "cgemm/core/error.hpp"
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

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

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

// The README's "Environment variables" table lists exactly the registry's knobs, each with
// the default the registry gives; the knobs have distinct names.
TEST(EnvRegistry, ReadmeTableIsTheRegistry) {
  std::ifstream in(std::string(CGEMM_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const size_t at = readme.find("### Environment variables");
  ASSERT_NE(at, std::string::npos);
  const std::string section = readme.substr(at, readme.find("\n## ", at) - at);
  std::set<std::string> names;
  for (const EnvKnob* k : kEnvKnobs) {
    EXPECT_TRUE(names.insert(std::string(k->name)).second) << k->name;
    const std::string row = "| `" + std::string(k->name) + "` | " + std::string(k->default_text) +
                            " | " + std::string(k->meaning) + " |";
    EXPECT_NE(section.find(row), std::string::npos) << "README lacks the row " << row;
  }
  size_t rows = 0;
  for (size_t p = section.find("\n| `"); p != std::string::npos; p = section.find("\n| `", p + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, kEnvKnobs.size()) << "README lists a variable the registry does not";

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
