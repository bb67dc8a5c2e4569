// launcher/output_files: outputs must not name inputs or each other, the writable check
// creates nothing, and a replaced file is either the old one or the whole new one.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "output_files.hpp"
#include "run_config.hpp"
#include "table.hpp"

namespace cgemm::launcher {
namespace {

namespace fs = std::filesystem;

class OutputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "cgemm_output_files_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {}));
  }
  static std::string distinct_error(const std::vector<NamedPath>& out,
                                    const std::vector<NamedPath>& in) {
    try {
      check_distinct(out, in);
    } catch (const OptionError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an OptionError";
    return {};
  }
  fs::path dir_;
};

TEST_F(OutputFilesTest, OutputsMustNotNameInputsOrEachOther) {
  const std::string ini = path("run.ini");
  std::ofstream(ini) << "batch = 2\n";
  EXPECT_NO_THROW(check_distinct({{"--report", path("r.json")}, {"--trace", path("t.json")}},
                                 {{"--config", ini}}));
  EXPECT_NO_THROW(check_distinct({{"--report", ""}, {"--trace", ""}}, {{"--config", ""}}));
  const std::string e1 = distinct_error({{"--report", ini}}, {{"--config", ini}});
  EXPECT_NE(e1.find("--report"), std::string::npos) << e1;
  EXPECT_NE(e1.find("--config"), std::string::npos) << e1;
  // The same file spelled another way.
  const std::string e2 = distinct_error(
      {{"--report", path("r.json")}, {"--trace", (dir_ / "." / "r.json").string()}}, {});
  EXPECT_NE(e2.find("--trace"), std::string::npos) << e2;
  EXPECT_NE(e2.find("--report"), std::string::npos) << e2;
}

TEST_F(OutputFilesTest, WritableCheckCreatesNothing) {
  EXPECT_NO_THROW(check_writable({"--report", path("new.json")}));
  EXPECT_FALSE(fs::exists(path("new.json")));
  std::ofstream(path("old.json")) << "old";
  EXPECT_NO_THROW(check_writable({"--report", path("old.json")}));
  EXPECT_EQ(read(path("old.json")), "old");
  EXPECT_NO_THROW(check_writable({"--sweep_csv", path("rows.csv"), true}));
  EXPECT_FALSE(fs::exists(path("rows.csv")));
  EXPECT_EQ(entries(), 1u);
  EXPECT_THROW(check_writable({"--report", path("no/such/dir/r.json")}), Error);
  EXPECT_THROW(check_writable({"--report", dir_.string()}), Error);
  EXPECT_FALSE(fs::exists(path("no")));
}

TEST_F(OutputFilesTest, WritableCheckSeesAReadOnlyFolder) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  EXPECT_THROW(check_writable({"--report", path("r.json")}), Error);
}

TEST_F(OutputFilesTest, ReplacingWritesWholeFileWithItsMode) {
  const std::string p = path("r.json");
  std::ofstream(p) << "old contents";
  chmod(p.c_str(), 0640);
  write_replacing("--report", p, "new");
  EXPECT_EQ(read(p), "new");
  struct stat st {};
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(entries(), 1u);  // no temporary file left
}

TEST_F(OutputFilesTest, AFailedWriteLeavesTheOldFile) {
  const std::string p = path("r.json");
  std::ofstream(p) << "old contents";
  EXPECT_THROW(write_replacing("--report", p,
                               [](std::ostream& out) {
                                 out << "half";
                                 throw std::runtime_error("the run failed");
                               }),
               std::runtime_error);
  EXPECT_EQ(read(p), "old contents");
  EXPECT_EQ(entries(), 1u);
  // Nowhere to write: the error names the option and the path; nothing is made.
  try {
    write_replacing("--report", path("no/such/r.json"), "x");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--report " + path("no/such/r.json")), std::string::npos);
  }
}

}  // namespace
}  // namespace cgemm::launcher

namespace cgemm::launcher {
namespace {

// launcher/table: one column list, every format.
TEST(Table, OneDefinitionEveryFormat) {
  Table t({{"name", "", "", 0, -1, "", Column::kAll},
           {"ms", "time", "(ms)", 4, 2, "", Column::kAll},
           {"speedup", "speed-up", "", 3, 2, "x", Column::kAll},
           {"n", "", "", 0, -1, "", Column::kCsv | Column::kJson},
           {"note", "", "", 0, -1, "", Column::kText}});
  t.add({std::string("a,b"), 1.23456, 2.0, int64_t{7}, std::string("x")});
  EXPECT_THROW(t.add({std::string("short")}), Error);
  EXPECT_EQ(t.csv(), "name,ms,speedup,n\n\"a,b\",1.2346,2.000,7\n");
  EXPECT_EQ(t.json_line(0), "{\"ms\":1.23456,\"n\":7,\"name\":\"a,b\",\"speedup\":2.0}\n");
  EXPECT_EQ(t.markdown(),
            "| name | time | speed-up | note |\n|---|---|---|---|\n| a,b | 1.23 | 2.00x | x |\n");
  EXPECT_EQ(t.text(), "# name time speed-up note\n#      (ms)\n   a,b 1.23    2.00x    x\n");
}

}  // namespace
}  // namespace cgemm::launcher
