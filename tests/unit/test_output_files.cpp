// launcher/common/output_files: outputs must not name inputs or each other, the writable check
// creates nothing, a replaced file is either the old one or the whole new one, symlinks are
// followed, devices are written in place, FIFOs refused, a failed row is cut back, and stale
// temporary files are removed.

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

#include "common/output_files.hpp"
#include "common/run_config.hpp"
#include "common/table.hpp"
#include "common/temp_files.hpp"

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

// Two outputs on /dev/null (one through a symlink) were refused as "names the same file": a
// character device is written in place, so both may go there.
TEST_F(OutputFilesTest, OutputsMayShareACharacterDevice) {
  fs::create_symlink("/dev/null", dir_ / "null");
  EXPECT_NO_THROW(check_distinct({{"--report", "/dev/null"}, {"--trace", path("null")}}, {}));
  EXPECT_NO_THROW(check_distinct({{"--report", "/dev/null"}, {"--trace", "/dev/null"}}, {}));
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

// What the error of `f` says; fails the test when `f` throws nothing.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return {};
}

bool is_kind(const std::string& p, mode_t kind) {
  struct stat st {};
  return lstat(p.c_str(), &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

TEST_F(OutputFilesTest, ASymlinkIsFollowed) {
  // A chain of links, one relative: the file at its end is replaced, in its own folder.
  fs::create_directory(path("real"));
  const std::string file = path("real/r.json");
  std::ofstream(file) << "old";
  fs::create_symlink("real/r.json", path("hop"));
  fs::create_symlink(path("hop"), path("link.json"));
  EXPECT_NO_THROW(check_writable({"--report", path("link.json")}));
  write_replacing("--report", path("link.json"), "new");
  EXPECT_TRUE(is_kind(path("link.json"), S_IFLNK));
  EXPECT_TRUE(is_kind(path("hop"), S_IFLNK));
  EXPECT_EQ(read(file), "new");
  EXPECT_EQ(entries(), 3u);
  EXPECT_EQ(std::distance(fs::directory_iterator(path("real")), {}), 1);
  // A dangling link: the file it names is created.
  fs::create_symlink("made.json", path("dangling.json"));
  EXPECT_NO_THROW(check_writable({"--trace", path("dangling.json")}));
  write_replacing("--trace", path("dangling.json"), "made");
  EXPECT_TRUE(is_kind(path("dangling.json"), S_IFLNK));
  EXPECT_EQ(read(path("made.json")), "made");
  // Appending goes through the link too.
  fs::create_symlink("rows.csv", path("rows_link.csv"));
  append_text("--sweep_csv", path("rows_link.csv"), "a\n");
  append_text("--sweep_csv", path("rows_link.csv"), "b\n");
  EXPECT_TRUE(is_kind(path("rows_link.csv"), S_IFLNK));
  EXPECT_EQ(read(path("rows.csv")), "a\nb\n");
  // A loop is refused with one message.
  fs::create_symlink("loop_b", path("loop_a"));
  fs::create_symlink("loop_a", path("loop_b"));
  const std::string loop = error_of([&] { write_replacing("--report", path("loop_a"), "x"); });
  EXPECT_NE(loop.find("symbolic links"), std::string::npos) << loop;
}

// Whether /dev/null is still the null device; if a regression replaced it (as root), it is
// made again so that the host survives the failed test.
bool dev_null_intact() {
  if (is_kind("/dev/null", S_IFCHR)) return true;
  if (geteuid() == 0 && unlink("/dev/null") == 0) {
    mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3));
    chmod("/dev/null", 0666);
  }
  return false;
}

TEST_F(OutputFilesTest, ACharacterDeviceIsWrittenInPlace) {
  // Through a symlink in the test's folder and by its own name: /dev/null stays a device.
  fs::create_symlink("/dev/null", path("null.json"));
  for (const std::string& p : {path("null.json"), std::string("/dev/null")}) {
    EXPECT_NO_THROW(check_writable({"--report", p}));
    EXPECT_NO_THROW(write_replacing("--report", p, "{}\n"));
    EXPECT_NO_THROW(append_text("--sweep_jsonl", p, "{}\n"));
    EXPECT_TRUE(dev_null_intact()) << "after writing " << p;
  }
  EXPECT_TRUE(is_kind(path("null.json"), S_IFLNK));
  EXPECT_EQ(entries(), 1u);
}

TEST_F(OutputFilesTest, AFifoIsRefusedWithoutWaiting) {
  const std::string fifo = path("fifo.json");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& e : {error_of([&] {
                                 check_writable({"--report", fifo});
                               }),
                               error_of([&] {
                                 check_writable({"--sweep_csv", fifo, true});
                               }),
                               error_of([&] { write_replacing("--trace", fifo, "x"); })}) {
    EXPECT_NE(e.find(fifo + ": is a FIFO (named pipe)"), std::string::npos) << e;
  }
  // No reader: the append fails at once instead of waiting for one.
  EXPECT_THROW(append_text("--sweep_csv", fifo, "a\n"), Error);
  EXPECT_EQ(first_line(fifo), "");
  EXPECT_TRUE(is_kind(fifo, S_IFIFO));
  EXPECT_EQ(entries(), 1u);
}

TEST_F(OutputFilesTest, AWriteErrorNamesItsReason) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string reason = std::strerror(ENOSPC);
  fs::create_symlink("/dev/full", path("full.jsonl"));
  const std::string e1 = error_of([&] { write_replacing("--report", path("full.jsonl"), "{}"); });
  EXPECT_NE(e1.find("--report " + path("full.jsonl") + ": write failed (" + reason + ")"),
            std::string::npos)
      << e1;
  const std::string e2 =
      error_of([&] { append_text("--sweep_jsonl", path("full.jsonl"), "{}\n"); });
  EXPECT_NE(e2.find("--sweep_jsonl " + path("full.jsonl") + ": append failed (" + reason + ")"),
            std::string::npos)
      << e2;
  EXPECT_TRUE(is_kind("/dev/full", S_IFCHR));
}

// A disk that takes only part of a row (here: a file size limit 10 bytes past the end of the
// file): the row is cut back off, and the error names the reason, not a stale errno.
TEST_F(OutputFilesTest, APartlyWrittenRowIsCutBack) {
  const std::string rows = path("rows.jsonl");
  const std::string old = "{\"experiment\":1}\n";
  std::ofstream(rows) << old;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[0]);
    signal(SIGXFSZ, SIG_IGN);  // the failed write then sets EFBIG instead of killing us
    const rlimit limit{old.size() + 10, old.size() + 10};
    std::string message = "no error";
    if (setrlimit(RLIMIT_FSIZE, &limit) == 0) {
      message = error_of([&] {
        append_text("--sweep_jsonl", rows, "{\"experiment\":2,\"label\":\"a long row\"}\n");
      });
    }
    const ssize_t n = write(pipe_fds[1], message.data(), message.size());
    _exit(n == static_cast<ssize_t>(message.size()) ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0;) {
    message.append(buf, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(message, "--sweep_jsonl " + rows + ": append failed (" + std::strerror(EFBIG) + ")");
  EXPECT_EQ(read(rows), old);
}

// A temporary file a killed run left beside its output is removed by the next write of that
// output, if its process (on this host) is gone; a live process's, another host's and another
// output's are left.
TEST_F(OutputFilesTest, StaleTemporariesAreRemoved) {
  const pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  const std::string me = std::string(host) + ".", live = std::to_string(getppid());
  const std::string stale = ".r.json.cgemm-tmp." + me + std::to_string(gone) + ".AbC123";
  const std::vector<std::string> kept = {
      ".r.json.cgemm-tmp." + me + live + ".AbC123",
      ".r.json.cgemm-tmp.elsewhere." + std::to_string(gone) + ".AbC123",
      ".t.json.cgemm-tmp." + me + std::to_string(gone) + ".AbC123"};
  std::ofstream(path(stale)) << "half a report";
  for (const std::string& name : kept) std::ofstream(path(name)) << "x";
  write_replacing("--report", path("r.json"), "whole");
  EXPECT_FALSE(fs::exists(path(stale)));
  for (const std::string& name : kept) EXPECT_TRUE(fs::exists(path(name))) << name;
  EXPECT_EQ(read(path("r.json")), "whole");
  EXPECT_EQ(entries(), 1u + kept.size());
}

// A 245-character output name failed with "File name too long": its temporary name added
// about 30 characters. It is written, and a temporary a killed run left for it is removed.
TEST_F(OutputFilesTest, LongOutputNamesAreWritten) {
  const std::string name = path(std::string(245, 'r'));
  const pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) {
    std::string tmp;
    _exit(make_temp_beside(name, tmp) >= 0 ? 0 : 1);
  }
  int status = -1;
  ASSERT_EQ(waitpid(gone, &status, 0), gone);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(entries(), 1u);  // the stale temporary
  write_replacing("--report", name, "whole");
  EXPECT_EQ(read(name), "whole");
  EXPECT_EQ(entries(), 1u);
}

}  // namespace
}  // namespace cgemm::launcher

namespace cgemm::launcher {
namespace {

// launcher/common/table: one column list, every format.
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
