// What the job programs make of hostile option input (issue 22): sweeps whose lists multiply
// past the limit or wrap size_t, empty booleans, empty list items under one rule for cgemm-run
// and cgemm-bench, and control bytes, NUL, a byte-order mark and escape bytes in what the
// messages echo; the bounds of --l2_mib and of a described dry run.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "bench/bench_config.hpp"
#include "bench/l2_flush_memory.hpp"
#include "common/dry_run.hpp"
#include "common/option_list.hpp"
#include "common/option_sweep.hpp"
#include "common/printable_text.hpp"
#include "common/run_config.hpp"

namespace cgemm::launcher {
namespace {

namespace fs = std::filesystem;

std::vector<const char*> argv_of(const std::string& program, const std::vector<std::string>& args) {
  std::vector<const char*> argv{program.c_str()};
  for (const auto& a : args) argv.push_back(a.c_str());
  return argv;
}

const std::string kRun = "cgemm-run", kBench = "cgemm-bench";

ParseResult parse_run(const std::vector<std::string>& args) {
  const auto argv = argv_of(kRun, args);
  return parse_run_config(static_cast<int>(argv.size()), argv.data());
}

BenchConfig parse_bench(const std::vector<std::string>& args) {
  const auto argv = argv_of(kBench, args);
  return parse_bench_config(static_cast<int>(argv.size()), argv.data()).config;
}

template <typename Parse>
std::string error_of(Parse parse) {
  try {
    parse();
  } catch (const OptionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an OptionError";
  return {};
}

std::string run_error(const std::vector<std::string>& args) {
  return error_of([&] { parse_run(args); });
}
std::string bench_error(const std::vector<std::string>& args) {
  return error_of([&] { parse_bench(args); });
}

void expect_contains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const auto& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
  }
}

// No byte a terminal would obey or hide: printable ASCII only (the tests' inputs are ASCII
// apart from the bytes under test).
void expect_printable_ascii(const std::string& text) {
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    EXPECT_TRUE(b >= 0x20 && b < 0x7F) << "byte " << int(b) << " in: " << text;
  }
}

class OptionInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "cgemm_option_input_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  fs::path dir_;
};

// ---------------------------------------------------------------------------------------
// Sweeps: the count checked before anything is expanded

// 16 lists of 16 values: 2^64 experiments, which wrapped size_t to 0 (no experiment, and every
// rank read the first one: a segfault).
TEST_F(OptionInputTest, SweepCountThatWrapsIsRefused) {
  std::vector<std::string> args;
  for (const char* name :
       {"batch", "seq_len", "hidden_in", "hidden_out", "warmup", "iterations", "check_rounds",
        "std", "seed", "num_max_streams", "chunks_per_rank", "compute_stream_priority",
        "communication_stream_priority", "dtype", "bias", "check"}) {
    args.push_back(std::string("--") + name);
    args.emplace_back("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16");
  }
  expect_contains(run_error(args), {"16 (batch) x 16 (seq_len)", "x 16 (check)",
                                    "more than 100000 experiments", "split the sweep"});
}

// 2^56 experiments (14 lists of 16) were expanded one by one before any ran.
TEST_F(OptionInputTest, SweepOverTheLimitIsRefusedBeforeExpanding) {
  std::vector<std::string> args;
  for (const char* name :
       {"batch", "seq_len", "hidden_in", "hidden_out", "warmup", "iterations", "check_rounds",
        "seed", "num_max_streams", "chunks_per_rank", "compute_stream_priority",
        "communication_stream_priority", "num_sm_for_communication", "std"}) {
    args.push_back(std::string("--") + name);
    args.emplace_back("1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16");
  }
  expect_contains(run_error(args), {"more than 100000 experiments"});
  // At the limit: counted, not refused (the experiments themselves are not parsed here).
  std::vector<SweepAxis> axes(2);
  axes[0].values.resize(1000);
  axes[1].values.resize(100);
  EXPECT_EQ(experiment_count(axes), kMaxExperiments);
  axes[1].values.resize(101);
  EXPECT_THROW(experiment_count(axes), OptionError);
}

TEST_F(OptionInputTest, HelpStatesTheSweepLimit) {
  std::string help = parse_run({"--help"}).help_text;
  for (char& c : help) c = c == '\n' ? ' ' : c;  // the notes wrap at 90 columns
  expect_contains(help, {"A job runs at most 100000 experiments."});
}

// ---------------------------------------------------------------------------------------
// Empty values: booleans, list items

// An empty boolean read as on; every other empty value is refused.
TEST_F(OptionInputTest, EmptyBooleanIsRefusedLikeOtherEmptyValues) {
  expect_contains(run_error({"--bias", ""}), {"'--bias' is invalid"});
  expect_contains(run_error({"--check", " "}), {"'--check' is invalid"});
  expect_contains(bench_error({"--knobs", ""}), {"'--knobs' is invalid"});
  const std::string ini = write("b.ini", "bias =\n");
  expect_contains(run_error({"--config", ini}), {ini + ", line 1", "'bias' is invalid"});
  const std::string dry = write("d.ini", "seq_len = 16\ndry_run =  \n");
  expect_contains(run_error({"--config", dry}), {dry + ", line 2", "'dry_run' is invalid"});
  // Other empty values, for comparison: the same words.
  expect_contains(run_error({"--batch", ""}), {"'--batch' is invalid"});
  // Still: a given boolean, and --dry_run alone.
  EXPECT_FALSE(parse_run({"--bias", "off"}).config.bias);
  EXPECT_TRUE(parse_run({"--dry_run"}).config.dry_run);
}

TEST_F(OptionInputTest, ListItemsOneRule) {
  EXPECT_EQ(list_items("a, b ,c", "x"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(list_items("a", "x"), (std::vector<std::string>{"a"}));
  for (const char* bad : {"", " ", "a,", ",a", "a,,b", "a, ,b"}) {
    try {
      list_items(bad, "--opt v");
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const OptionError& e) {
      EXPECT_EQ(std::string(e.what()), "--opt v: an empty value in the list (lists are 'A, B, C')");
    }
  }
}

// cgemm-bench's lists skipped empty items (--cases tiny,) or ran the sweep for an empty
// --parts; cgemm-run's sweep lists refused them. One rule now, in the same words.
TEST_F(OptionInputTest, BenchListsRefuseEmptyItemsAsCgemmRunDoes) {
  const std::string rule = "an empty value in the list (lists are 'A, B, C')";
  expect_contains(bench_error({"--cases", "tiny,"}), {"--cases tiny,: " + rule});
  expect_contains(bench_error({"--cases", "tiny,,small"}), {"--cases tiny,,small: " + rule});
  expect_contains(bench_error({"--parts", ""}), {"--parts \"\": " + rule});
  expect_contains(bench_error({"--parts", "chunking,"}), {"--parts chunking,: " + rule});
  expect_contains(bench_error({"--parts_tp", "2,"}), {"--parts_tp 2,: " + rule});
  expect_contains(bench_error({"--parts_chunks_per_rank", ",4"}), {rule});
  const std::string ini = write("b.ini", "cases = tiny,\n");
  expect_contains(bench_error({"--config", ini}), {"cases = tiny, (" + ini + ", line 1): " + rule});
  expect_contains(run_error({"--seq_len", "16,"}), {"--seq_len 16,: " + rule});
  // Blanks around items are trimmed, as in cgemm-run's lists.
  EXPECT_EQ(parse_bench({"--cases", "tiny, small"}).cases,
            (std::vector<std::string>{"tiny", "small"}));
  EXPECT_EQ(parse_bench({"--parts_tp", "2, 4"}).parts_tp, (std::vector<int>{2, 4}));
  // --parts left out: the sweep.
  EXPECT_TRUE(parse_bench({}).parts.empty());
}

// ---------------------------------------------------------------------------------------
// User text in messages

TEST_F(OptionInputTest, PrintableEscapesWhatATerminalWouldHideOrObey) {
  using namespace std::string_literals;
  EXPECT_EQ(printable("plain text, 1.5 [MiB]"), "plain text, 1.5 [MiB]");
  EXPECT_EQ(printable("a\0b"s), "a\\x00b");
  EXPECT_EQ(printable("\xEF\xBB\xBF"
                      "batch"),
            "\\xEF\\xBB\\xBFbatch");
  EXPECT_EQ(printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable("tab\there\r\n"), "tab\\x09here\\x0d\\x0a");
  EXPECT_EQ(printable("\x7f"), "\\x7f");
  EXPECT_EQ(printable("caf\xC3\xA9 \xE2\x82\xAC"), "caf\xC3\xA9 \xE2\x82\xAC");  // visible UTF-8
  EXPECT_EQ(printable("\xC3"), "\\xC3");                    // truncated sequence
  EXPECT_EQ(printable("\xC0\xAF"), "\\xC0\\xAF");           // overlong
  EXPECT_EQ(printable("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // surrogate
  EXPECT_EQ(printable("\xC2\x9B"), "\\xC2\\x9B");           // C1 control (CSI)
  EXPECT_EQ(printable("\xE2\x80\xAE"), "\\xE2\\x80\\xAE");  // right-to-left override
  // Idempotent: a message made of messages passes through it again unchanged.
  const std::string once = printable("x\0\x1b\xEF\xBB\xBF\xFF"s);
  EXPECT_EQ(printable(once), once);
}

// A NUL in a config cut the message at the NUL ("the argument ('1"); it is refused with its
// line, shown whole.
TEST_F(OptionInputTest, NulInConfigIsShownNotCut) {
  using namespace std::string_literals;
  const std::string ini = write("nul.ini", "seq_len = 16\nbatch = 1\0 2\n"s);
  const std::string msg = run_error({"--config", ini});
  expect_contains(msg, {ini + ", line 2: a NUL byte in 'batch = 1\\x00 2'", "an INI file is text"});
  expect_printable_ascii(msg);
  expect_contains(bench_error({"--config", ini}), {"line 2", "1\\x00 2"});
}

// A byte-order mark and escape bytes were written raw to the terminal.
TEST_F(OptionInputTest, BomAndEscapeBytesAreShownEscaped) {
  const std::string bom = write("bom.ini",
                                "\xEF\xBB\xBF"
                                "batch = 2\n");
  std::string msg = run_error({"--config", bom});
  expect_contains(msg, {bom + ", line 1", "'\\xEF\\xBB\\xBFbatch'"});
  expect_printable_ascii(msg);
  const std::string esc = write("esc.ini", "dtype = \x1b[31mred\n");
  msg = run_error({"--config", esc});
  expect_contains(msg, {"dtype = \\x1b[31mred (" + esc + ", line 1)", "unknown dtype"});
  expect_printable_ascii(msg);
  msg = run_error({"--collective", "all_\x1b]0;title\x07gather"});
  expect_contains(msg, {"\\x1b]0;title\\x07"});
  expect_printable_ascii(msg);
  msg = bench_error({"--cases", "tiny,\x1b[2J"});
  expect_contains(msg, {"unknown case '\\x1b[2J'"});
  expect_printable_ascii(msg);
  msg = run_error({"--seq_len\x1b[1m", "4"});  // an unknown option's name
  expect_contains(msg, {"\\x1b[1m"});
  expect_printable_ascii(msg);
  msg = run_error({"--bias", "o\x01n"});
  expect_contains(msg, {"o\\x01n"});
  expect_printable_ascii(msg);
}

// ---------------------------------------------------------------------------------------
// Limits that protect the host

// --l2_mib 1e12 filled memory until the OOM killer came.
TEST_F(OptionInputTest, L2MibIsBounded) {
  expect_contains(bench_error({"--l2_mib", "1e12"}),
                  {"--l2_mib 1e+12: must be at most 4096 [MiB]"});
  expect_contains(bench_error({"--l2_mib", "4096.5"}), {"at most 4096"});
  EXPECT_EQ(parse_bench({"--l2_mib", "4096"}).l2_mib, kMaxL2Mib);
  EXPECT_EQ(l2_flush_bytes(1), 2.0 * 1048576);
  const std::vector<std::string> help{"--help"};
  const auto argv = argv_of(kBench, help);
  expect_contains(parse_bench_config(2, argv.data()).help_text, {"at most 4096"});
}

// dp 1000 x tp 1000 planned and printed a million ranks (minutes, ~100 GB) before a line.
TEST_F(OptionInputTest, DescribedDryRunWorldIsBounded) {
  RunConfig cfg =
      parse_run({"--dry_run", "--dp", "1000", "--tp", "1000", "--ranks_per_node", "8"}).config;
  try {
    planned_world(cfg, 1);
    ADD_FAILURE() << "a million ranks accepted";
  } catch (const OptionError& e) {
    expect_contains(e.what(), {"--dp 1000 x --tp 1000 = 1000000 ranks", "at most 8192 ranks"});
  }
  cfg.dp = 512;
  cfg.tp = 16;
  EXPECT_EQ(planned_world(cfg, 1), kMaxDescribedRanks);
  expect_contains(parse_run({"--help"}).help_text, {"most 8192"});
}

// dp 1 x tp 8192, within the rank cap, needed about 50 GB (each rank plans its transfers with
// each TP peer): world x tp is bounded too, before any planning.
TEST_F(OptionInputTest, DescribedDryRunWorkIsBounded) {
  RunConfig cfg =
      parse_run({"--dry_run", "--dp", "1", "--tp", "8192", "--ranks_per_node", "8"}).config;
  try {
    planned_world(cfg, 1);
    ADD_FAILURE() << "world x tp = 2^26 accepted";
  } catch (const OptionError& e) {
    expect_contains(e.what(), {"--dp 1 x --tp 8192", "world x tp = 67108864", "at most 262144"});
  }
  cfg.tp = 512;  // 512 x 512 = 2^18: at the bound
  EXPECT_EQ(planned_world(cfg, 1), 512);
  cfg.dp = 2;
  EXPECT_THROW(planned_world(cfg, 1), OptionError);
  expect_contains(parse_run({"--help"}).help_text, {"2^18 = 262144"});
}

// One list of 2 million values was split whole (307 MB) before the experiment count was
// checked; 40 million ran out of memory. Splitting stops one past the limit, so the list is
// refused after reading 100001 items, whatever its length. (Asserted on the items split, not on
// the process's peak memory, which depends on the build.)
TEST_F(OptionInputTest, OneHugeListIsRefusedWithoutSplittingItAll) {
  std::string seeds = "1";
  for (int i = 1; i < 4'000'000; ++i) seeds += ",1";
  EXPECT_EQ(list_items(seeds, "--seed", 100'001).size(), 100'001u);
  const std::string error = error_of([&] { parse_run({"--seed", seeds}); });
  expect_contains(error, {"more than 100000 (seed) = more than 100000 experiments"});
}

}  // namespace
}  // namespace cgemm::launcher
