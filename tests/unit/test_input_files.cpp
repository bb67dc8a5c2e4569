// launcher/common/input_files: the files the programs read must be regular files. A FIFO is refused
// before it is opened (an open would wait for a writer forever), as are folders and devices.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/csv_file.hpp"
#include "common/input_files.hpp"
#include "common/option_table.hpp"

namespace cgemm::launcher {
namespace {

namespace fs = std::filesystem;

class InputFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "cgemm_input_files_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string refusal(const std::string& what, const std::string& p) {
    try {
      require_regular_input(what, p);
    } catch (const OptionError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an OptionError for " << p;
    return {};
  }
  fs::path dir_;
};

TEST_F(InputFilesTest, OnlyRegularFilesPass) {
  std::ofstream(path("run.ini")) << "batch = 2\n";
  fs::create_symlink("run.ini", path("link.ini"));
  EXPECT_NO_THROW(require_regular_input("--config", path("run.ini")));
  EXPECT_NO_THROW(require_regular_input("--config", path("link.ini")));
  // Missing: the caller's open says so in its own words.
  EXPECT_NO_THROW(require_regular_input("--config", path("missing.ini")));

  ASSERT_EQ(mkfifo(path("fifo.ini").c_str(), 0600), 0);
  EXPECT_EQ(refusal("--config", path("fifo.ini")),
            "--config " + path("fifo.ini") + ": is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(refusal("--peers", dir_.string()),
            "--peers " + dir_.string() + ": is a folder, not a regular file");
  EXPECT_EQ(refusal("dump file", "/dev/null"),
            "dump file /dev/null: is a character device, not a regular file");
}

TEST_F(InputFilesTest, ACsvInputThatIsAFifoIsRefusedBeforeItIsOpened) {
  ASSERT_EQ(mkfifo(path("peers.csv").c_str(), 0600), 0);
  try {
    read_csv("--peers", path("peers.csv"));
    ADD_FAILURE() << "expected an OptionError";
  } catch (const OptionError& e) {
    EXPECT_NE(std::string(e.what()).find("--peers " + path("peers.csv") + ": is a FIFO"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cgemm::launcher
