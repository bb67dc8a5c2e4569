// cgemm-run's options: defaults, command line over --config file, the GEMM block rule, every
// class of option error (each message must name the option and the value), the shipped
// configs, resolve_mesh and the to_ini round trip. And cgemm-bench's options, which share
// cgemm-run's table: the same messages for the shared options, its own on top, --config.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/bench_config.hpp"
#include "common/run_config.hpp"

namespace cgemm::launcher {
namespace {

namespace fs = std::filesystem;

#ifdef CGEMM_SOURCE_DIR
const fs::path kConfigsDir = fs::path(CGEMM_SOURCE_DIR) / "configs";
#else
const fs::path kConfigsDir = fs::path(CGEMM_TEST_DATA_DIR) / ".." / ".." / "configs";
#endif

ParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cgemm-run");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_run_config(static_cast<int>(argv.size()), argv.data());
}

RunConfig parse_config(std::vector<std::string> args) {
  ParseResult r = parse(std::move(args));
  EXPECT_FALSE(r.help);
  return r.config;
}

// The OptionError message of parsing `args`; fails the test when it parses.
std::string parse_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const OptionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an OptionError";
  return {};
}

std::string resolve_error(RunConfig cfg, int world) {
  try {
    resolve_mesh(cfg, world);
  } catch (const OptionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an OptionError for world size " << world;
  return {};
}

void expect_contains(const std::string& text, std::initializer_list<std::string> parts) {
  for (const auto& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
  }
}

std::vector<std::tuple<std::string, CollectiveOp, int64_t, int64_t>> block(const RunConfig& c) {
  std::vector<std::tuple<std::string, CollectiveOp, int64_t, int64_t>> out;
  for (const auto& g : c.gemms) out.emplace_back(g.name, g.collective, g.hidden_in, g.hidden_out);
  return out;
}

// RunConfig has no operator==; every field but config_file (where it was read from).
void expect_same(const RunConfig& a, const RunConfig& b) {
  EXPECT_EQ(a.dp, b.dp);
  EXPECT_EQ(a.tp, b.tp);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.seq_len, b.seq_len);
  EXPECT_EQ(block(a), block(b));
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.bias, b.bias);
  EXPECT_EQ(a.transpose_batch_sequence, b.transpose_batch_sequence);
  EXPECT_EQ(a.std, b.std);  // exact: to_ini writes the shortest round-tripping text
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.warmup, b.warmup);
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_EQ(a.check, b.check);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.report, b.report);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.overlap.policy, b.overlap.policy);
  EXPECT_EQ(a.overlap.num_max_streams, b.overlap.num_max_streams);
  EXPECT_EQ(a.overlap.compute_stream_priority, b.overlap.compute_stream_priority);
  EXPECT_EQ(a.overlap.communication_stream_priority, b.overlap.communication_stream_priority);
  EXPECT_EQ(a.overlap.num_sm_for_communication, b.overlap.num_sm_for_communication);
  EXPECT_EQ(a.overlap.use_ce, b.overlap.use_ce);
  EXPECT_EQ(a.overlap.aggregate_all_gather, b.overlap.aggregate_all_gather);
  EXPECT_EQ(a.overlap.chunks_per_rank, b.overlap.chunks_per_rank);
  EXPECT_EQ(a.experiment, b.experiment);
  EXPECT_EQ(a.moe.tokens, b.moe.tokens);
  EXPECT_EQ(a.moe.experts, b.moe.experts);
  EXPECT_EQ(a.moe.hidden, b.moe.hidden);
  EXPECT_EQ(a.moe.ffn, b.moe.ffn);
  EXPECT_EQ(a.moe.router, b.moe.router);
  EXPECT_EQ(a.moe.empty_groups, b.moe.empty_groups);
  EXPECT_EQ(a.moe.check_rows, b.moe.check_rows);
}

// Each test gets its own scratch folder for INI files.
class RunConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "cgemm_run_config_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  RunConfig round_trip(const RunConfig& cfg) {
    return parse_config({"--config", write("round_trip.ini", to_ini(cfg))});
  }

  fs::path dir_;
};

// ---------------------------------------------------------------------------------------
// Defaults, help

TEST_F(RunConfigTest, BareRunIsSmallAllGather) {
  const RunConfig c = parse_config({});
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.tp, 0);
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.seq_len, 256);
  ASSERT_EQ(c.gemms.size(), 1u);
  EXPECT_EQ(c.gemms[0].name, "all_gather");
  EXPECT_EQ(c.gemms[0].collective, CollectiveOp::kAllGather);
  EXPECT_EQ(c.gemms[0].hidden_in, 256);
  EXPECT_EQ(c.gemms[0].hidden_out, 512);
  EXPECT_EQ(c.dtype, DType::kBFloat16);
  EXPECT_TRUE(c.bias);
  EXPECT_FALSE(c.transpose_batch_sequence);
  EXPECT_FLOAT_EQ(c.std, 0.023f);
  EXPECT_EQ(c.seed, 1234u);
  EXPECT_EQ(c.warmup, 2);
  EXPECT_EQ(c.iterations, 5);
  EXPECT_TRUE(c.check);
  EXPECT_EQ(c.backend, BackendKind::kAuto);
  EXPECT_TRUE(c.report.empty());
  EXPECT_TRUE(c.config_file.empty());
  EXPECT_EQ(c.overlap.num_max_streams, 3);
  EXPECT_EQ(c.overlap.compute_stream_priority, 0);
  EXPECT_EQ(c.overlap.communication_stream_priority, 0);
  EXPECT_EQ(c.overlap.num_sm_for_communication, 2);
  EXPECT_TRUE(c.overlap.use_ce);
  EXPECT_FALSE(c.overlap.aggregate_all_gather);
  EXPECT_EQ(c.overlap.chunks_per_rank, 1);
}

TEST_F(RunConfigTest, HelpListsEveryOptionGroupedWithDefaults) {
  for (const char* flag : {"--help", "-h"}) {
    const ParseResult r = parse({flag});
    ASSERT_TRUE(r.help);
    const std::string& h = r.help_text;
    expect_contains(h, {"Mesh", "Problem", "Run", "Overlap", "--config"});
    expect_contains(h, {"--dp N (=1)",
                        "--tp N (=0)",
                        "--batch N (=2)",
                        "--seq_len N (=256)",
                        "--hidden_in K (=256)",
                        "--hidden_out N (=512)",
                        "--collective OP (=all_gather)",
                        "--gemm",
                        "--dtype T (=bf16)",
                        "--bias on|off (=on)",
                        "--transpose_batch_sequence on|off (=off)",
                        "--std X (=0.023)",
                        "--seed N (=1234)",
                        "--warmup N (=2)",
                        "--iterations N (=5)",
                        "--check on|off (=on)",
                        "--backend B (=auto)",
                        "--report FILE",
                        "--num_max_streams N (=3)",
                        "--compute_stream_priority P (=0)",
                        "--communication_stream_priority P (=0)",
                        "--num_sm_for_communication N (=2)",
                        "--use_ce on|off (=on)",
                        "--aggregate_all_gather on|off (=off)"});
    // Units, and what the CPU backend ignores.
    expect_contains(h, {"[elements]", "[tokens]", "[ranks]", "ms", "[SMs]", "[streams]",
                        "CPU backend ignores"});
    // Groups come in this order.
    EXPECT_LT(h.find("Mesh"), h.find("Problem"));
    EXPECT_LT(h.find("Problem"), h.find("Run:"));
    EXPECT_LT(h.find("Run:"), h.find("Overlap"));
  }
}

TEST_F(RunConfigTest, HelpWinsOverABadConfigFile) {
  EXPECT_TRUE(parse({"--help", "--config", "/nonexistent/x.ini"}).help);
}

TEST_F(RunConfigTest, Version) {
  const ParseResult r = parse({"--version"});
  EXPECT_TRUE(r.help);
  expect_contains(r.help_text, {"cgemm-run"});
}

// ---------------------------------------------------------------------------------------
// Command line and file

TEST_F(RunConfigTest, CommandLineOverridesFile) {
  const std::string ini = write("run.ini",
                                "# a comment\n"
                                "batch = 4   # trailing comment\n"
                                "seq_len = 512\n"
                                "dtype = fp32\n"
                                "check = off\n"
                                "num_max_streams = 2\n");
  const RunConfig c = parse_config({"--config", ini, "--batch", "8", "--num_max_streams=4"});
  EXPECT_EQ(c.batch, 8);      // command line
  EXPECT_EQ(c.seq_len, 512);  // file
  EXPECT_EQ(c.dtype, DType::kFloat32);
  EXPECT_FALSE(c.check);
  EXPECT_EQ(c.overlap.num_max_streams, 4);
  EXPECT_EQ(c.iterations, 5);  // default
  EXPECT_EQ(c.config_file, ini);
  // Order on the command line does not matter.
  EXPECT_EQ(parse_config({"--batch", "8", "--config", ini}).batch, 8);
}

TEST_F(RunConfigTest, EveryOptionFromTheCommandLine) {
  const RunConfig c = parse_config({"--dp",
                                    "2",
                                    "--tp",
                                    "4",
                                    "--batch",
                                    "6",
                                    "--seq_len",
                                    "64",
                                    "--hidden_in",
                                    "32",
                                    "--hidden_out",
                                    "48",
                                    "--collective",
                                    "reduce_scatter",
                                    "--dtype",
                                    "float16",
                                    "--bias",
                                    "off",
                                    "--transpose_batch_sequence",
                                    "on",
                                    "--std",
                                    "0.5",
                                    "--seed",
                                    "18446744073709551615",
                                    "--warmup",
                                    "0",
                                    "--iterations",
                                    "7",
                                    "--check",
                                    "false",
                                    "--backend",
                                    "cpu",
                                    "--report",
                                    "out.json",
                                    "--num_max_streams",
                                    "1",
                                    "--compute_stream_priority",
                                    "1",
                                    "--communication_stream_priority",
                                    "2",
                                    "--num_sm_for_communication",
                                    "8",
                                    "--use_ce",
                                    "0",
                                    "--aggregate_all_gather",
                                    "yes",
                                    "--chunks_per_rank",
                                    "4"});
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.tp, 4);
  EXPECT_EQ(c.batch, 6);
  EXPECT_EQ(c.seq_len, 64);
  ASSERT_EQ(c.gemms.size(), 1u);
  EXPECT_EQ(c.gemms[0].name, "reduce_scatter");
  EXPECT_EQ(c.gemms[0].collective, CollectiveOp::kReduceScatter);
  EXPECT_EQ(c.gemms[0].hidden_in, 32);
  EXPECT_EQ(c.gemms[0].hidden_out, 48);
  EXPECT_EQ(c.dtype, DType::kFloat16);
  EXPECT_FALSE(c.bias);
  EXPECT_TRUE(c.transpose_batch_sequence);
  EXPECT_FLOAT_EQ(c.std, 0.5f);
  EXPECT_EQ(c.seed, 18446744073709551615ull);
  EXPECT_EQ(c.warmup, 0);
  EXPECT_EQ(c.iterations, 7);
  EXPECT_FALSE(c.check);
  EXPECT_EQ(c.backend, BackendKind::kCpu);
  EXPECT_EQ(c.report, "out.json");
  EXPECT_EQ(c.overlap.num_max_streams, 1);
  EXPECT_EQ(c.overlap.compute_stream_priority, 1);
  EXPECT_EQ(c.overlap.communication_stream_priority, 2);
  EXPECT_EQ(c.overlap.num_sm_for_communication, 8);
  EXPECT_FALSE(c.overlap.use_ce);
  EXPECT_TRUE(c.overlap.aggregate_all_gather);
  EXPECT_EQ(c.overlap.chunks_per_rank, 4);
}

TEST_F(RunConfigTest, ChunksPerRankMustBePositive) {
  for (const char* bad : {"0", "-2", "x"}) {
    EXPECT_THROW(parse_config({"--chunks_per_rank", bad}), OptionError) << bad;
  }
}

TEST_F(RunConfigTest, DTypeSpellings) {
  EXPECT_EQ(parse_config({"--dtype", "bf16"}).dtype, DType::kBFloat16);
  EXPECT_EQ(parse_config({"--dtype", "bfloat16"}).dtype, DType::kBFloat16);
  EXPECT_EQ(parse_config({"--dtype", "fp16"}).dtype, DType::kFloat16);
  EXPECT_EQ(parse_config({"--dtype", "float16"}).dtype, DType::kFloat16);
  EXPECT_EQ(parse_config({"--dtype", "fp32"}).dtype, DType::kFloat32);
  EXPECT_EQ(parse_config({"--dtype", "float32"}).dtype, DType::kFloat32);
}

TEST_F(RunConfigTest, BoolSpellings) {
  for (const char* on : {"on", "true", "1", "yes"}) {
    EXPECT_TRUE(parse_config({"--aggregate_all_gather", on}).overlap.aggregate_all_gather) << on;
    EXPECT_TRUE(
        parse_config({"--config", write("b.ini", std::string("transpose_batch_sequence = ") + on)})
            .transpose_batch_sequence)
        << on;
  }
  for (const char* off : {"off", "false", "0", "no"}) {
    EXPECT_FALSE(parse_config({"--bias", off}).bias) << off;
    EXPECT_FALSE(
        parse_config({"--config", write("b.ini", std::string("use_ce = ") + off)}).overlap.use_ce)
        << off;
  }
}

TEST_F(RunConfigTest, BackendNames) {
  EXPECT_EQ(parse_config({"--backend", "auto"}).backend, BackendKind::kAuto);
  EXPECT_EQ(parse_config({"--backend", "cpu"}).backend, BackendKind::kCpu);
  EXPECT_EQ(parse_config({"--backend", "cuda"}).backend, BackendKind::kCuda);
  for (auto k : {BackendKind::kAuto, BackendKind::kCpu, BackendKind::kCuda}) {
    EXPECT_EQ(parse_backend(backend_name(k)), k);
  }
}

// ---------------------------------------------------------------------------------------
// The GEMM block

TEST_F(RunConfigTest, GemmEntriesFromFileAreTheBlock) {
  const std::string ini = write("mlp.ini",
                                "gemm = up_proj all_gather 768 3072\n"
                                "gemm =   down_proj   reduce_scatter 3072 768  \n"
                                "hidden_in = 99\n");  // ignored: the gemm entries win
  const RunConfig c = parse_config({"--config", ini});
  ASSERT_EQ(c.gemms.size(), 2u);
  EXPECT_EQ(c.gemms[0].name, "up_proj");
  EXPECT_EQ(c.gemms[0].collective, CollectiveOp::kAllGather);
  EXPECT_EQ(c.gemms[0].hidden_in, 768);
  EXPECT_EQ(c.gemms[0].hidden_out, 3072);
  EXPECT_EQ(c.gemms[1].name, "down_proj");
  EXPECT_EQ(c.gemms[1].collective, CollectiveOp::kReduceScatter);
  EXPECT_EQ(c.gemms[1].hidden_in, 3072);
  EXPECT_EQ(c.gemms[1].hidden_out, 768);
}

TEST_F(RunConfigTest, GemmEntriesFromCommandLine) {
  const RunConfig c = parse_config({"--gemm", "qkv all_gather 64 192", "--gemm", "out none 64 64"});
  ASSERT_EQ(c.gemms.size(), 2u);
  EXPECT_EQ(c.gemms[0].name, "qkv");
  EXPECT_EQ(c.gemms[1].name, "out");
  EXPECT_EQ(c.gemms[1].collective, CollectiveOp::kNone);
}

TEST_F(RunConfigTest, CommandLineGemmEntriesReplaceTheFileOnes) {
  const std::string ini = write("mlp.ini",
                                "gemm = up_proj all_gather 768 3072\n"
                                "gemm = down_proj reduce_scatter 3072 768\n");
  const RunConfig c = parse_config({"--config", ini, "--gemm", "only none 8 8"});
  ASSERT_EQ(c.gemms.size(), 1u);
  EXPECT_EQ(c.gemms[0].name, "only");
}

TEST_F(RunConfigTest, SingleGemmOnCommandLineReplacesFileBlock) {
  const std::string ini = write("mlp.ini",
                                "gemm = up_proj all_gather 768 3072\n"
                                "collective = reduce_scatter\n"
                                "hidden_out = 1024\n");
  // --hidden_in on the command line: the block is one GEMM; the rest comes from the file.
  const RunConfig c = parse_config({"--config", ini, "--hidden_in", "2048"});
  ASSERT_EQ(c.gemms.size(), 1u);
  EXPECT_EQ(c.gemms[0].name, "reduce_scatter");
  EXPECT_EQ(c.gemms[0].collective, CollectiveOp::kReduceScatter);
  EXPECT_EQ(c.gemms[0].hidden_in, 2048);
  EXPECT_EQ(c.gemms[0].hidden_out, 1024);
  // --collective alone, the sizes missing from the file: defaults.
  const RunConfig d =
      parse_config({"--config", write("g.ini", "gemm = a none 8 8\n"), "--collective", "none"});
  ASSERT_EQ(d.gemms.size(), 1u);
  EXPECT_EQ(d.gemms[0].name, "none");
  EXPECT_EQ(d.gemms[0].hidden_in, 256);
  EXPECT_EQ(d.gemms[0].hidden_out, 512);
}

TEST_F(RunConfigTest, SingleGemmFromFileWithoutEntries) {
  const RunConfig c = parse_config(
      {"--config", write("one.ini", "collective = none\nhidden_in = 64\nhidden_out = 32\n")});
  ASSERT_EQ(c.gemms.size(), 1u);
  EXPECT_EQ(c.gemms[0].name, "none");
  EXPECT_EQ(c.gemms[0].collective, CollectiveOp::kNone);
  EXPECT_EQ(c.gemms[0].hidden_in, 64);
  EXPECT_EQ(c.gemms[0].hidden_out, 32);
}

TEST_F(RunConfigTest, GemmAndSingleGemmOptionsBothOnCommandLine) {
  expect_contains(parse_error({"--gemm", "a none 8 8", "--hidden_out", "16"}),
                  {"--gemm", "--hidden_out"});
}

// ---------------------------------------------------------------------------------------
// Errors: each names the option and the value

TEST_F(RunConfigTest, UnknownOption) {
  expect_contains(parse_error({"--bogus", "1"}), {"--bogus", "--help"});
  // Dashes for underscores, or a prefix (no guessing: the names are a contract).
  expect_contains(parse_error({"--seq-len", "8"}), {"--seq-len", "did you mean --seq_len"});
  expect_contains(parse_error({"--iter", "8"}), {"--iter", "did you mean --iterations"});
  expect_contains(parse_error({"stray"}), {"unexpected argument 'stray'"});
  // An unquoted gemm entry.
  expect_contains(parse_error({"--gemm", "up", "all_gather", "8", "8"}),
                  {"unexpected argument 'all_gather'", "--gemm \""});
}

TEST_F(RunConfigTest, UnknownOptionInFileNamesFileAndLine) {
  const std::string ini = write("u.ini", "batch = 2\n\n# c\nbogus = 1\n");
  expect_contains(parse_error({"--config", ini}), {ini + ", line 4", "bogus", "--help"});
  expect_contains(parse_error({"--config", write("s.ini", "[mesh]\ndp = 2\n")}),
                  {"line 2", "mesh.dp", "no [sections]"});
  expect_contains(parse_error({"--config", write("c.ini", "config = other.ini\n")}),
                  {"line 1", "'config'", "command-line option only"});
}

TEST_F(RunConfigTest, MalformedIniLine) {
  const std::string ini = write("m.ini", "batch = 2\nseq_len 4\n");
  expect_contains(parse_error({"--config", ini}), {ini + ", line 2", "seq_len 4"});
}

TEST_F(RunConfigTest, DuplicateOption) {
  expect_contains(parse_error({"--batch", "2", "--batch", "4"}), {"--batch", "more than once"});
  const std::string ini = write("d.ini", "batch = 2\nbatch = 4\n");
  expect_contains(parse_error({"--config", ini}), {"lines 1, 2", "batch", "more than once"});
}

TEST_F(RunConfigTest, MissingConfigFile) {
  expect_contains(parse_error({"--config", "/nonexistent/run.ini"}),
                  {"--config /nonexistent/run.ini", "no such file"});
  expect_contains(parse_error({"--config", dir_.string()}), {"--config", "directory"});
}

TEST_F(RunConfigTest, NonPositiveSizes) {
  for (const char* opt : {"batch", "seq_len", "hidden_in", "hidden_out", "dp"}) {
    for (const char* v : {"0", "-4"}) {
      expect_contains(parse_error({std::string("--") + opt, v}),
                      {std::string("--") + opt + " " + v, "at least 1"});
    }
  }
  expect_contains(parse_error({"--tp", "-1"}), {"--tp -1"});
  // From the file: the message says where.
  const std::string ini = write("z.ini", "dp = 1\nseq_len = 0\n");
  expect_contains(parse_error({"--config", ini}), {"seq_len = 0", ini + ", line 2"});
}

TEST_F(RunConfigTest, NotANumber) {
  expect_contains(parse_error({"--batch", "two"}), {"--batch", "'two'"});
  expect_contains(parse_error({"--iterations", "1.5"}), {"--iterations", "'1.5'"});
  expect_contains(parse_error({"--seed", "-1"}), {"--seed -1", "unsigned"});
  expect_contains(parse_error({"--seed", "12ab"}), {"--seed 12ab"});
  const std::string ini = write("n.ini", "\nwarmup = lots\n");
  expect_contains(parse_error({"--config", ini}), {ini + ", line 2", "warmup", "'lots'"});
}

TEST_F(RunConfigTest, UnknownEnumValues) {
  expect_contains(parse_error({"--dtype", "int8"}), {"--dtype int8", "bf16"});
  expect_contains(parse_error({"--dtype", "float8_e4m3fn"}), {"--dtype float8_e4m3fn"});
  expect_contains(parse_error({"--collective", "all-gather"}),
                  {"--collective all-gather", "all_gather"});
  expect_contains(parse_error({"--backend", "gpu"}), {"--backend gpu", "auto, cpu, cuda"});
  EXPECT_THROW(parse_backend("CUDA"), Error);
  expect_contains(parse_error({"--overlap", "sometimes"}),
                  {"--overlap sometimes", "auto, on, off"});
  EXPECT_EQ(parse_config({"--overlap", "on"}).overlap.policy, OverlapPolicy::kAlways);
}

TEST_F(RunConfigTest, BadBool) {
  expect_contains(parse_error({"--bias", "maybe"}), {"--bias", "'maybe'", "on|off"});
  expect_contains(parse_error({"--check"}), {"--check", "missing"});
  const std::string ini = write("b.ini", "use_ce = sometimes\n");
  expect_contains(parse_error({"--config", ini}), {ini + ", line 1", "use_ce", "'sometimes'"});
}

// Boost.Program_options 1.74 loops forever formatting an error whose option name or value
// holds one of its placeholders; the messages are built without it (tests/fuzz/regressions/).
TEST_F(RunConfigTest, BoostPlaceholdersInNamesAndValues) {
  expect_contains(parse_error({"--batch", "%value%"}), {"--batch", "'%value%'"});
  expect_contains(parse_error({"--use_ce", "%original_token%"}),
                  {"--use_ce", "'%original_token%'"});
  expect_contains(parse_error({"--%value%", "1"}), {"%value%", "--help"});
  expect_contains(parse_error({"--batch", "1", "--batch", "%canonical_option%"}),
                  {"--batch", "more than once"});
  const std::string v = write("v.ini", "seq_len = 8\nbatch = %value%\n");
  expect_contains(parse_error({"--config", v}), {v + ", line 2", "batch", "'%value%'"});
  const std::string n = write("n.ini", "%original_token% = 1\n");
  expect_contains(parse_error({"--config", n}), {n + ", line 1", "%original_token%"});
  const std::string c = write("c.ini", "%canonical_option% = %prefix_option%\n");
  expect_contains(parse_error({"--config", c}), {"%canonical_option%"});
  // String options never reach Boost's formatting; their own messages quote the value.
  expect_contains(parse_error({"--dtype", "%value%"}), {"--dtype %value%"});
}

TEST_F(RunConfigTest, RunAndOverlapBounds) {
  expect_contains(parse_error({"--num_max_streams", "0"}), {"--num_max_streams 0"});
  expect_contains(parse_error({"--iterations", "0"}), {"--iterations 0"});
  expect_contains(parse_error({"--warmup", "-1"}), {"--warmup -1"});
  expect_contains(parse_error({"--num_sm_for_communication", "0"}),
                  {"--num_sm_for_communication 0"});
  expect_contains(parse_error({"--compute_stream_priority", "-1"}),
                  {"--compute_stream_priority -1"});
  expect_contains(parse_error({"--communication_stream_priority", "-2"}),
                  {"--communication_stream_priority -2"});
  EXPECT_EQ(parse_config({"--warmup", "0"}).warmup, 0);
}

TEST_F(RunConfigTest, StdMustBePositive) {
  expect_contains(parse_error({"--std", "0"}), {"--std 0", "positive"});
  expect_contains(parse_error({"--std", "-0.5"}), {"--std -0.5", "positive"});
  expect_contains(parse_error({"--std", "nan"}), {"--std", "positive"});
  expect_contains(parse_error({"--std", "inf"}), {"--std", "positive"});
}

TEST_F(RunConfigTest, MalformedGemmEntry) {
  expect_contains(parse_error({"--gemm", "up_proj all_gather 768"}),
                  {"--gemm \"up_proj all_gather 768\"", "NAME COLLECTIVE HIDDEN_IN HIDDEN_OUT"});
  expect_contains(parse_error({"--gemm", "up_proj all_gather 768 3072 1"}), {"5 fields"});
  expect_contains(parse_error({"--gemm", "up_proj gather 768 3072"}),
                  {"--gemm \"up_proj gather 768 3072\"", "'gather'"});
  expect_contains(parse_error({"--gemm", "up_proj all_gather 0 3072"}), {"hidden_in '0'"});
  expect_contains(parse_error({"--gemm", "up_proj all_gather 768 -3"}), {"hidden_out '-3'"});
  expect_contains(parse_error({"--gemm", "up_proj all_gather 768 3k"}), {"hidden_out '3k'"});
  expect_contains(parse_error({"--gemm", "up/proj all_gather 768 3072"}), {"name 'up/proj'"});
  const std::string ini = write("g.ini", "gemm = a all_gather 8 8\ngemm = b all_gather 8\n");
  expect_contains(parse_error({"--config", ini}), {"gemm = b all_gather 8", ini + ", line 2"});
}

TEST_F(RunConfigTest, DuplicateGemmNames) {
  expect_contains(parse_error({"--gemm", "a all_gather 8 8", "--gemm", "a reduce_scatter 8 8"}),
                  {"duplicate gemm name 'a'"});
  const std::string ini = write("g.ini", "gemm = a all_gather 8 8\ngemm = a none 8 8\n");
  expect_contains(parse_error({"--config", ini}), {"duplicate gemm name 'a'", "line 2"});
}

TEST_F(RunConfigTest, OutputFiles) {
  // An empty path given explicitly is a bad option, not "no file".
  for (const char* opt : {"--report", "--trace", "--output_dump"}) {
    expect_contains(parse_error({opt, ""}), {std::string(opt) + " \"\"", "empty path"});
  }
  const std::string e = write("e.ini", "report =\n");
  expect_contains(parse_error({"--config", e}), {"report", e + ", line 1", "empty path"});
  // An output naming the config or another output (its SVG too): both options are named.
  const std::string ini = write("run.ini", "batch = 2\n");
  expect_contains(parse_error({"--config", ini, "--report", ini}), {"--report", "--config"});
  expect_contains(
      parse_error({"--config", ini, "--output_dump", (dir_ / "." / "run.ini").string()}),
      {"--output_dump", "--config"});
  expect_contains(parse_error({"--report", "a.json", "--trace", "a.json"}),
                  {"--report", "--trace"});
  expect_contains(parse_error({"--report", "t.json.svg", "--trace", "t.json"}),
                  {"--report", "--trace's SVG"});
  expect_contains(parse_error({"--report", "d.bin", "--output_dump", "d.bin"}),
                  {"--report", "--output_dump"});
  const RunConfig c = parse_config({"--report", "r.json", "--trace", "t.json"});
  std::vector<std::string> paths;
  for (const auto& o : output_files(c)) paths.push_back(o.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"r.json", "t.json", "t.json.svg", "", "", ""}));
}

// ---------------------------------------------------------------------------------------
// Sweeps

TEST_F(RunConfigTest, NoSweepIsOneExperiment) {
  const ParseResult r = parse({"--batch", "4"});
  ASSERT_EQ(r.experiments.size(), 1u);
  EXPECT_EQ(r.experiments[0].batch, 4);
  EXPECT_TRUE(r.swept.empty());
  EXPECT_EQ(r.labels, (std::vector<std::string>{""}));
}

TEST_F(RunConfigTest, SweepIsTheProductInOrder) {
  const std::string ini = write("s.ini",
                                "seq_len = 1024, 2048,4096\n"
                                "collective = all_gather, reduce_scatter\n"
                                "dtype = bf16, fp16\n");
  const ParseResult r = parse({"--config", ini, "--num_max_streams", "1,2"});
  ASSERT_EQ(r.experiments.size(), 24u);
  EXPECT_EQ(r.swept,
            (std::vector<std::string>{"num_max_streams", "seq_len", "collective", "dtype"}));
  EXPECT_EQ(r.labels[0], "num_max_streams=1 seq_len=1024 collective=all_gather dtype=bf16");
  EXPECT_EQ(r.labels[1], "num_max_streams=1 seq_len=1024 collective=all_gather dtype=fp16");
  EXPECT_EQ(r.labels[23], "num_max_streams=2 seq_len=4096 collective=reduce_scatter dtype=fp16");
  EXPECT_EQ(r.experiments[1].dtype, DType::kFloat16);
  EXPECT_EQ(r.experiments[2].gemms[0].collective, CollectiveOp::kReduceScatter);
  EXPECT_EQ(r.experiments[4].seq_len, 2048);
  EXPECT_EQ(r.experiments[12].overlap.num_max_streams, 2);
  expect_same(r.config, r.experiments[0]);
  // The command line's value (a list or not) replaces the file's list.
  const ParseResult c = parse({"--config", ini, "--seq_len", "64", "--dtype", "fp32,bf16"});
  EXPECT_EQ(c.experiments.size(), 4u);
  EXPECT_EQ(c.experiments[3].seq_len, 64);
  EXPECT_EQ(c.experiments[2].dtype, DType::kBFloat16);  // command-line lists come first
}

TEST_F(RunConfigTest, SweepErrorsNameTheExperiment) {
  expect_contains(parse_error({"--seq_len", "16,32,0"}),
                  {"experiment 3/3 (seq_len=0)", "--seq_len 0", "at least 1"});
  expect_contains(parse_error({"--batch", "1,two"}), {"experiment 2/2", "'two'"});
  const std::string ini = write("b.ini", "dtype = bf16, fp16, int7\n");
  expect_contains(parse_error({"--config", ini}), {"experiment 3/3", "int7", ini + ", line 1"});
  expect_contains(parse_error({"--seq_len", "16,,32"}), {"--seq_len", "empty value"});
  expect_contains(parse_error({"--seq_len", "16,"}), {"empty value"});
  for (const char* opt : {"--dp", "--tp", "--backend", "--gpu_sharing", "--transport"}) {
    expect_contains(parse_error({opt, "1,2"}), {std::string(opt) + " 1,2", "may not be swept"});
  }
  expect_contains(parse_error({"--seq_len", "16,32", "--report", "r.json"}),
                  {"--report r.json", "sweep"});
  expect_contains(parse_error({"--seq_len", "16,32", "--sweep_csv", ""}),
                  {"--sweep_csv \"\"", "empty path"});
  expect_contains(parse_error({"--sweep_csv", "a.csv", "--sweep_jsonl", "a.csv"}),
                  {"--sweep_jsonl", "--sweep_csv"});
  // Help wins over a list.
  EXPECT_TRUE(parse({"--seq_len", "1,2", "--help"}).help);
}

TEST_F(RunConfigTest, HelpDescribesSweeps) {
  expect_contains(parse({"--help"}).help_text, {"Sweep", "--sweep_csv FILE", "--sweep_jsonl FILE",
                                                "comma-separated list", "may not be swept"});
}

// ---------------------------------------------------------------------------------------
// The shipped configs

TEST_F(RunConfigTest, DemoConfig) {
  const std::string path = (kConfigsDir / "demo.ini").string();
  RunConfig c = parse_config({"--config", path});
  EXPECT_EQ(c.seq_len, 1024);
  EXPECT_EQ(c.batch, 2);
  EXPECT_EQ(c.dtype, DType::kBFloat16);
  EXPECT_EQ(c.dp, 2);
  EXPECT_TRUE(c.bias);
  EXPECT_EQ(c.warmup, 1);
  EXPECT_EQ(c.iterations, 3);
  EXPECT_EQ(c.backend, BackendKind::kAuto);
  using Block = decltype(block(c));
  EXPECT_EQ(block(c), (Block{{"up_proj", CollectiveOp::kAllGather, 768, 3072},
                             {"down_proj", CollectiveOp::kReduceScatter, 3072, 768}}));
  resolve_mesh(c, 4);
  EXPECT_EQ(c.tp, 2);
}

TEST_F(RunConfigTest, TransformerEngineConfigs) {
  for (auto [file, op] : {std::pair{"te_bf16_all_gather.ini", CollectiveOp::kAllGather},
                          std::pair{"te_bf16_reduce_scatter.ini", CollectiveOp::kReduceScatter}}) {
    RunConfig c = parse_config({"--config", (kConfigsDir / file).string()});
    EXPECT_EQ(c.batch, 4) << file;
    EXPECT_EQ(c.seq_len, 8192) << file;
    ASSERT_EQ(c.gemms.size(), 1u) << file;
    EXPECT_EQ(c.gemms[0].collective, op) << file;
    EXPECT_EQ(c.gemms[0].hidden_in, 4096) << file;
    EXPECT_EQ(c.gemms[0].hidden_out, 8192) << file;
    EXPECT_EQ(c.dtype, DType::kBFloat16) << file;
    EXPECT_EQ(c.dp, 1) << file;
    EXPECT_EQ(c.warmup, 5) << file;
    EXPECT_EQ(c.iterations, 20) << file;
    EXPECT_EQ(c.backend, BackendKind::kAuto) << file;
    for (int world : {1, 2, 4, 8}) {
      RunConfig r = c;
      resolve_mesh(r, world);
      EXPECT_EQ(r.tp, world) << file;
    }
  }
}

// ---------------------------------------------------------------------------------------
// experiment = moe (launcher/common/moe_options.hpp)

TEST_F(RunConfigTest, MoeDefaults) {
  const RunConfig c = parse_config({});
  EXPECT_EQ(c.experiment, Experiment::kCollectiveGemm);
  EXPECT_EQ(c.moe.tokens, 512);
  EXPECT_EQ(c.moe.experts, 8);
  EXPECT_EQ(c.moe.hidden, 64);
  EXPECT_EQ(c.moe.ffn, 96);
  EXPECT_EQ(c.moe.router, MoeRouter::kUniform);
  EXPECT_EQ(c.moe.empty_groups, 0);
  EXPECT_EQ(c.moe.check_rows, 0);
}

TEST_F(RunConfigTest, MoeHelpListsItsOptionsWithUnits) {
  const std::string h = parse({"--help"}).help_text;
  expect_contains(h,
                  {"--experiment X (=collective_gemm)", "MoE expert block", "--moe_tokens T (=512)",
                   "--moe_experts G (=8)", "--moe_hidden H (=64)", "--moe_ffn F (=96)",
                   "--moe_router X (=uniform)", "one_group", "--moe_empty_groups E (=0)",
                   "--moe_check_rows R (=0)", "[experts]", "[rows per group]"});
  // Refused in sweeps: the sweep note names them.
  expect_contains(h, {"moe_tokens", "may not be swept"});
}

TEST_F(RunConfigTest, MoeOptionsFromCommandLineAndFileRoundTrip) {
  const std::string ini = write("moe.ini",
                                "experiment = moe\nmoe_tokens = 1000\nmoe_experts = 16\n"
                                "moe_router = skewed\nmoe_empty_groups = 3\n");
  RunConfig c = parse_config({"--config", ini, "--moe_hidden", "48", "--moe_ffn", "80",
                              "--moe_check_rows", "5", "--moe_tokens", "2000", "--dtype", "fp16"});
  EXPECT_EQ(c.experiment, Experiment::kMoe);
  EXPECT_EQ(c.moe.tokens, 2000);  // the command line wins
  EXPECT_EQ(c.moe.experts, 16);
  EXPECT_EQ(c.moe.hidden, 48);
  EXPECT_EQ(c.moe.ffn, 80);
  EXPECT_EQ(c.moe.router, MoeRouter::kSkewed);
  EXPECT_EQ(c.moe.empty_groups, 3);
  EXPECT_EQ(c.moe.check_rows, 5);
  expect_contains(to_ini(c), {"experiment = moe\n", "moe_tokens = 2000\n", "moe_router = skewed\n",
                              "moe_empty_groups = 3\n", "moe_check_rows = 5\n"});
  expect_same(round_trip(c), c);
  // Its ranks run on their own: any dp x tp of the world (a collective GEMM's seq_len 256 does
  // not divide by tp 3; the MoE experiment does not ask it to).
  resolve_mesh(c, 3);
  EXPECT_EQ(c.tp, 3);
  EXPECT_NE(resolve_error(parse_config({"--experiment", "moe", "--dp", "2"}), 3).find("--dp 2"),
            std::string::npos);
}

TEST_F(RunConfigTest, MoeErrorsNameTheOption) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
      {{"--experiment", "moes"}, {"--experiment moes", "unknown experiment 'moes'", "moe"}},
      {{"--moe_router", "zipf"}, {"--moe_router zipf", "uniform, skewed or one_group"}},
      {{"--moe_tokens", "0"}, {"--moe_tokens 0", "must be 1 to 2147483647 [tokens]"}},
      {{"--moe_tokens", "2147483648"}, {"--moe_tokens 2147483648", "[tokens]"}},
      {{"--moe_experts", "0"}, {"--moe_experts 0", "[experts]"}},
      {{"--moe_hidden", "-4"}, {"--moe_hidden -4", "[elements]"}},
      {{"--moe_ffn", "x"}, {"moe_ffn", "x"}},
      {{"--moe_check_rows", "-1"}, {"--moe_check_rows -1", "must be 0 (every row) or more"}},
      {{"--moe_empty_groups", "8"}, {"--moe_empty_groups 8", "less than moe_experts 8"}},
      {{"--moe_router", "one_group", "--moe_empty_groups", "1"},
       {"--moe_empty_groups 1", "one_group already leaves"}},
      {{"--experiment", "moe", "--dtype", "bf16,fp16"},
       {"experiment moe", "sweep of 2 experiments", "dtype", "give single values"}},
      {{"--moe_tokens", "16,32"}, {"moe_tokens", "may not be swept"}},
      {{"--experiment", "moe", "--dry_run"}, {"--dry_run", "experiment moe has no dry run"}},
      {{"--experiment", "moe", "--trace", "/tmp/t.json"}, {"--trace /tmp/t.json", "no trace"}},
      {{"--experiment", "moe", "--sweep_csv", "/tmp/s.csv"}, {"--sweep_csv", "runs no sweep"}},
      {{"--experiment", "moe", "--scaling", "current"}, {"--scaling current", "give scaling none"}},
  };
  for (const auto& [args, parts] : cases) {
    SCOPED_TRACE(args.front() + " " + args[1]);
    const std::string error = parse_error(args);
    for (const std::string& part : parts) expect_contains(error, {part});
  }
  // Not refused where they apply.
  EXPECT_NO_THROW(parse({"--experiment", "moe", "--moe_router", "one_group"}));
  EXPECT_NO_THROW(parse({"--experiment", "moe", "--moe_empty_groups", "7"}));
}

TEST_F(RunConfigTest, MoeConfigs) {
  RunConfig demo = parse_config({"--config", (kConfigsDir / "moe_demo.ini").string()});
  EXPECT_EQ(demo.experiment, Experiment::kMoe);
  EXPECT_EQ(demo.moe.router, MoeRouter::kSkewed);
  EXPECT_EQ(demo.moe.empty_groups, 2);
  EXPECT_EQ(demo.backend, BackendKind::kAuto);
  for (int world : {1, 2}) {
    RunConfig r = demo;
    resolve_mesh(r, world);
  }
  const RunConfig h200 = parse_config({"--config", (kConfigsDir / "moe_h200.ini").string()});
  EXPECT_EQ(h200.experiment, Experiment::kMoe);
  EXPECT_EQ(h200.moe.tokens, 65536);
  EXPECT_EQ(h200.moe.experts, 64);
  EXPECT_EQ(h200.moe.hidden, 4096);
  EXPECT_EQ(h200.moe.ffn, 2048);
  EXPECT_EQ(h200.dtype, DType::kBFloat16);
  EXPECT_EQ(h200.backend, BackendKind::kCuda);
  EXPECT_EQ(h200.moe.check_rows, 8);
}

// ---------------------------------------------------------------------------------------
// resolve_mesh

TEST_F(RunConfigTest, ResolveMeshFillsTp) {
  RunConfig c = parse_config({"--dp", "2", "--batch", "4"});
  resolve_mesh(c, 8);
  EXPECT_EQ(c.tp, 4);
  RunConfig d = parse_config({"--dp", "2", "--tp", "2"});
  resolve_mesh(d, 4);
  EXPECT_EQ(d.tp, 2);
}

TEST_F(RunConfigTest, ResolveMeshErrors) {
  EXPECT_EQ(resolve_error(parse_config({"--dp", "3"}), 4),
            "--dp 3 does not divide the world size 4");
  expect_contains(resolve_error(parse_config({"--tp", "3"}), 4),
                  {"--tp 3", "--dp 1", "world size is 4"});
  expect_contains(resolve_error(parse_config({"--dp", "2", "--batch", "3"}), 4),
                  {"--batch 3", "--dp 2"});
  expect_contains(resolve_error(parse_config({"--seq_len", "6"}), 4), {"--seq_len 6", "tp 4"});
  // all_gather shards N, reduce_scatter and none shard K.
  expect_contains(resolve_error(parse_config({"--hidden_out", "514"}), 4),
                  {"hidden_out 514", "tp 4", "all_gather"});
  expect_contains(
      resolve_error(parse_config({"--collective", "reduce_scatter", "--hidden_in", "6"}), 4),
      {"hidden_in 6", "tp 4", "reduce_scatter"});
  expect_contains(resolve_error(parse_config({"--collective", "none", "--hidden_in", "6"}), 4),
                  {"hidden_in 6", "tp 4"});
  expect_contains(
      resolve_error(parse_config({"--gemm", "a all_gather 8 8", "--gemm", "b reduce_scatter 6 8"}),
                    4),
      {"hidden_in 6", "'b'"});
  // Only the sharded size has to divide.
  RunConfig ok = parse_config({"--hidden_in", "6", "--hidden_out", "8"});
  EXPECT_NO_THROW(resolve_mesh(ok, 4));
  expect_contains(resolve_error(parse_config({}), 0), {"world size 0"});
}

// ---------------------------------------------------------------------------------------
// to_ini

TEST_F(RunConfigTest, ToIniRoundTripsDefaults) {
  const RunConfig c = parse_config({});
  expect_same(round_trip(c), c);
}

TEST_F(RunConfigTest, ToIniRoundTripsEveryField) {
  RunConfig c = parse_config({"--dp",
                              "2",
                              "--batch",
                              "6",
                              "--seq_len",
                              "64",
                              "--gemm",
                              "up all_gather 32 96",
                              "--gemm",
                              "down reduce_scatter 96 32",
                              "--gemm",
                              "proj none 32 32",
                              "--dtype",
                              "fp16",
                              "--bias",
                              "off",
                              "--transpose_batch_sequence",
                              "on",
                              "--std",
                              "0.1",
                              "--seed",
                              "98765432109876",
                              "--warmup",
                              "0",
                              "--iterations",
                              "9",
                              "--check",
                              "off",
                              "--backend",
                              "cuda",
                              "--report",
                              "/tmp/report.json",
                              "--trace",
                              "/tmp/trace.json",
                              "--overlap",
                              "off",
                              "--num_max_streams",
                              "5",
                              "--compute_stream_priority",
                              "1",
                              "--communication_stream_priority",
                              "3",
                              "--num_sm_for_communication",
                              "4",
                              "--use_ce",
                              "off",
                              "--aggregate_all_gather",
                              "on",
                              "--chunks_per_rank",
                              "2"});
  resolve_mesh(c, 8);
  RunConfig back = round_trip(c);
  EXPECT_EQ(back.overlap.chunks_per_rank, 2);
  expect_same(back, c);
  EXPECT_EQ(back.tp, 4);
  // And again: to_ini is a fixed point (but for the "# read from" comment).
  back.config_file.clear();
  EXPECT_EQ(to_ini(back), to_ini(c));
}

TEST_F(RunConfigTest, ToIniRoundTripsSingleGemmVariants) {
  // One GEMM named after its collective (the scalar options) ...
  const RunConfig a = parse_config({"--collective", "reduce_scatter", "--hidden_in", "128"});
  expect_same(round_trip(a), a);
  // ... and one gemm entry with its own name.
  const RunConfig b = parse_config({"--gemm", "qkv all_gather 64 192"});
  expect_same(round_trip(b), b);
  // An awkward std.
  const RunConfig s = parse_config({"--std", "0.0123456789"});
  expect_same(round_trip(s), s);
}

TEST_F(RunConfigTest, ToIniRoundTripsShippedConfigs) {
  for (const char* file : {"demo.ini", "te_bf16_all_gather.ini", "te_bf16_reduce_scatter.ini",
                           "moe_demo.ini", "moe_h200.ini"}) {
    const RunConfig c = parse_config({"--config", (kConfigsDir / file).string()});
    expect_same(round_trip(c), c);
  }
}

// ---------------------------------------------------------------------------------------
// cgemm-bench: the shared table plus the benchmark's own options

BenchParseResult parse_bench(std::vector<std::string> args) {
  args.insert(args.begin(), "cgemm-bench");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_bench_config(static_cast<int>(argv.size()), argv.data());
}

std::string bench_error(std::vector<std::string> args) {
  try {
    parse_bench(std::move(args));
  } catch (const OptionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an OptionError";
  return {};
}

// cgemm-run's message for the same arguments, as cgemm-bench words it (the program's name in
// the "--help" hint).
std::string run_error_as_bench(std::vector<std::string> args) {
  std::string msg = parse_error(std::move(args));
  for (size_t at; (at = msg.find("cgemm-run")) != std::string::npos;) {
    msg.replace(at, 9, "cgemm-bench");
  }
  return msg;
}

// The help entry of --NAME (its option column and its text), whitespace collapsed: the
// programs' help columns may differ in width, so the text wraps at other words.
std::string help_entry(const std::string& help, const std::string& name) {
  const auto at = help.find("  --" + name + " ");
  if (at == std::string::npos) return {};
  auto end = help.find("\n  -", at + 1);
  end = std::min(end, help.find("\n\n", at));
  std::string out;
  for (char c : help.substr(at, end == std::string::npos ? std::string::npos : end - at)) {
    const bool space = c == ' ' || c == '\n';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return out;
}

using BenchConfigTest = RunConfigTest;

TEST_F(BenchConfigTest, Defaults) {
  const BenchParseResult r = parse_bench({});
  ASSERT_FALSE(r.help);
  const BenchConfig& c = r.config;
  EXPECT_EQ(c.cases, (std::vector<std::string>{"standard", "llama70b", "gpt3_175b", "small"}));
  EXPECT_TRUE(c.knobs);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.warmup, 5);
  EXPECT_EQ(c.iterations, 20);
  EXPECT_EQ(c.l2_mib, 60.0);
  EXPECT_EQ(c.out, ".");
  EXPECT_TRUE(c.peers.empty());
  EXPECT_TRUE(c.trace.empty());
  EXPECT_EQ(c.backend, BackendKind::kAuto);
  EXPECT_FALSE(c.gpu_sharing);
  EXPECT_EQ(c.timeout, 300.0);
  // The overlap knobs' defaults are cgemm-run's.
  const RunConfig run = parse_config({});
  EXPECT_EQ(c.overlap.policy, run.overlap.policy);
  EXPECT_EQ(c.overlap.num_max_streams, run.overlap.num_max_streams);
  EXPECT_EQ(c.overlap.compute_stream_priority, run.overlap.compute_stream_priority);
  EXPECT_EQ(c.overlap.communication_stream_priority, run.overlap.communication_stream_priority);
  EXPECT_EQ(c.overlap.num_sm_for_communication, run.overlap.num_sm_for_communication);
  EXPECT_EQ(c.overlap.use_ce, run.overlap.use_ce);
  EXPECT_EQ(c.overlap.aggregate_all_gather, run.overlap.aggregate_all_gather);
}

TEST_F(BenchConfigTest, SharedOptionsAreRead) {
  const BenchConfig c = parse_bench({"--dp",
                                     "2",
                                     "--warmup",
                                     "0",
                                     "--iterations",
                                     "3",
                                     "--backend",
                                     "cpu",
                                     "--gpu_sharing",
                                     "on",
                                     "--timeout",
                                     "12",
                                     "--trace",
                                     dir_ / "t.json",
                                     "--overlap",
                                     "on",
                                     "--num_max_streams",
                                     "2",
                                     "--compute_stream_priority",
                                     "1",
                                     "--communication_stream_priority",
                                     "2",
                                     "--num_sm_for_communication",
                                     "4",
                                     "--use_ce",
                                     "off",
                                     "--aggregate_all_gather",
                                     "yes"})
                            .config;
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.warmup, 0);
  EXPECT_EQ(c.iterations, 3);
  EXPECT_EQ(c.backend, BackendKind::kCpu);
  EXPECT_TRUE(c.gpu_sharing);
  EXPECT_EQ(c.timeout, 12.0);
  EXPECT_EQ(c.trace, (dir_ / "t.json").string());
  EXPECT_EQ(c.overlap.policy, parse_overlap_policy("on"));
  EXPECT_EQ(c.overlap.num_max_streams, 2);
  EXPECT_EQ(c.overlap.compute_stream_priority, 1);
  EXPECT_EQ(c.overlap.communication_stream_priority, 2);
  EXPECT_EQ(c.overlap.num_sm_for_communication, 4);
  EXPECT_FALSE(c.overlap.use_ce);
  EXPECT_TRUE(c.overlap.aggregate_all_gather);
}

TEST_F(BenchConfigTest, BadSharedOptionGivesCgemmRunsMessage) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--dp", "0"},
           {"--warmup", "-1"},
           {"--iterations", "0"},
           {"--backend", "gpu"},
           {"--timeout", "-1"},
           {"--gpu_sharing", "maybe"},
           {"--transport", "verbs"},
           {"--trace", ""},
           {"--overlap", "sometimes"},
           {"--num_max_streams", "0"},
           {"--compute_stream_priority", "-1"},
           {"--communication_stream_priority", "-2"},
           {"--num_sm_for_communication", "0"},
           {"--use_ce", "2"},
           {"--aggregate_all_gather", "x"},
           {"--dp", "two"},
           {"--iterations"},
           {"--config", "/nonexistent/b.ini"},
       }) {
    const std::string bench = bench_error(args);
    EXPECT_EQ(bench, run_error_as_bench(args)) << args.front();
    if (args.size() > 1 && !args[1].empty()) expect_contains(bench, {args[0], args[1]});
  }
  expect_contains(bench_error({"--dp", "0"}), {"--dp 0: must be at least 1 [ranks]"});
  expect_contains(bench_error({"--use_ce", "2"}), {"use_ce", "cgemm-bench --help"});
}

TEST_F(BenchConfigTest, OwnOptions) {
  const BenchConfig c = parse_bench({"--cases", "tiny,small", "--knobs", "off", "--l2_mib", "40",
                                     "--out", dir_.string(), "--peers", dir_ / "peers.csv"})
                            .config;
  EXPECT_EQ(c.cases, (std::vector<std::string>{"tiny", "small"}));
  EXPECT_FALSE(c.knobs);
  EXPECT_EQ(c.l2_mib, 40.0);
  EXPECT_EQ(c.out, dir_.string());
  EXPECT_EQ(c.peers, (dir_ / "peers.csv").string());
  // Errors name the option and the value.
  expect_contains(bench_error({"--cases", "tiny,bogus"}),
                  {"--cases tiny,bogus", "unknown case 'bogus'", "tiny"});
  expect_contains(bench_error({"--cases", ","}), {"--cases ,", "an empty value in the list"});
  expect_contains(bench_error({"--knobs", "sometimes"}), {"knobs", "sometimes", "--help"});
  expect_contains(bench_error({"--l2_mib", "0"}), {"--l2_mib 0", "positive"});
  expect_contains(bench_error({"--out", ""}), {"--out \"\"", "an empty path"});
  expect_contains(bench_error({"--peers", ""}), {"--peers \"\"", "an empty path"});
  // Outputs may not name one another or an input.
  expect_contains(bench_error({"--out", dir_.string(), "--peers", dir_ / "cgemm_bench.csv"}),
                  {"--peers"});
  expect_contains(bench_error({"--out", dir_.string(), "--trace", dir_ / "cgemm_bench.md"}),
                  {"--trace"});
}

TEST_F(BenchConfigTest, CgemmRunOnlyOptionsAreUnknown) {
  expect_contains(bench_error({"--batch", "2"}),
                  {"unrecognised option '--batch'", "run cgemm-bench --help"});
  expect_contains(bench_error({"--tp", "2"}), {"--tp"});
  expect_contains(bench_error({"--case", "tiny"}), {"did you mean --cases?"});
  expect_contains(bench_error({"stray"}), {"unexpected argument 'stray'", "cgemm-bench --help"});
  // No sweeps: a list of a shared option is a bad value, not a set of experiments.
  expect_contains(bench_error({"--warmup", "1,2"}), {"warmup", "1,2"});
}

TEST_F(BenchConfigTest, ConfigFile) {
  const std::string ini = write("bench.ini",
                                "# cgemm-bench\n"
                                "cases = tiny\n"
                                "knobs = off\n"
                                "warmup = 1\n"
                                "iterations = 2\n"
                                "backend = cpu\n"
                                "num_max_streams = 2\n");
  const BenchConfig c = parse_bench({"--config", ini, "--warmup", "3"}).config;
  EXPECT_EQ(c.cases, std::vector<std::string>{"tiny"});
  EXPECT_FALSE(c.knobs);
  EXPECT_EQ(c.warmup, 3);  // the command line wins
  EXPECT_EQ(c.iterations, 2);
  EXPECT_EQ(c.backend, BackendKind::kCpu);
  EXPECT_EQ(c.overlap.num_max_streams, 2);
  EXPECT_EQ(c.config_file, ini);

  // A bad shared value in the file: cgemm-run's message, with the file's line.
  const std::string bad = write("bad.ini", "cases = tiny\n\niterations = 0\n");
  expect_contains(bench_error({"--config", bad}),
                  {"iterations = 0 (" + bad + ", line 3): must be at least 1 [iterations]"});
  const std::string shared_bad = write("shared_bad.ini", "num_sm_for_communication = 0\n");
  EXPECT_EQ(bench_error({"--config", shared_bad}), run_error_as_bench({"--config", shared_bad}));
  // A bad bench-only value, an unknown name and a section, as cgemm-run says them.
  const std::string bad_case = write("bad_case.ini", "cases = huge\n");
  expect_contains(bench_error({"--config", bad_case}),
                  {"cases = huge (" + bad_case + ", line 1)", "unknown case 'huge'"});
  const std::string unknown = write("unknown.ini", "batch = 2\n");
  expect_contains(bench_error({"--config", unknown}),
                  {unknown + ", line 1", "batch", "cgemm-bench --help"});
  const std::string section = write("section.ini", "[bench]\ncases = tiny\n");
  EXPECT_EQ(bench_error({"--config", section}), run_error_as_bench({"--config", section}));
  expect_contains(bench_error({"--config", section}), {"cgemm-bench's INI files have no"});
  // The file may not be an output.
  expect_contains(bench_error({"--config", ini, "--trace", ini}), {"--config", "--trace"});
}

TEST_F(BenchConfigTest, HelpListsEveryOptionWithDefaultAndUnit) {
  for (const char* flag : {"--help", "-h"}) {
    const BenchParseResult r = parse_bench({flag, "--dp", "0"});  // help wins
    ASSERT_TRUE(r.help);
    const std::string& h = r.help_text;
    expect_contains(h, {"cgemm-bench", "General", "Mesh", "Run:", "Overlap", "Benchmark"});
    expect_contains(h, {"--help",
                        "--version",
                        "--config FILE",
                        "--dp N (=1)",
                        "--warmup N (=5)",
                        "--iterations N (=20)",
                        "--timeout S (=300)",
                        "--backend B (=auto)",
                        "--gpu_sharing on|off (=off)",
                        "--trace FILE",
                        "--overlap P (=auto)",
                        "--num_max_streams N (=3)",
                        "--compute_stream_priority P (=0)",
                        "--communication_stream_priority P (=0)",
                        "--num_sm_for_communication N (=2)",
                        "--use_ce on|off (=on)",
                        "--aggregate_all_gather on|off (=off)",
                        "--cases LIST (=standard,llama70b,gpt3_175b,small)",
                        "--knobs on|off (=on)",
                        "--l2_mib X (=60)",
                        "--out DIR (=.)",
                        "--peers FILE"});
    expect_contains(h, {"[ranks]", "[iterations]", "[s]", "[streams]", "[SMs]", "[MiB]", "[path"});
    // The shared options read as cgemm-run's (warmup and iterations: other defaults).
    const std::string run = parse({"--help"}).help_text;
    for (const char* name :
         {"config", "dp", "timeout", "backend", "gpu_sharing", "transport", "trace", "overlap",
          "num_max_streams", "compute_stream_priority", "communication_stream_priority",
          "num_sm_for_communication", "use_ce", "aggregate_all_gather"}) {
      EXPECT_FALSE(help_entry(h, name).empty()) << name;
      EXPECT_EQ(help_entry(h, name), help_entry(run, name)) << name;
    }
    // cgemm-run's own options are not cgemm-bench's.
    EXPECT_EQ(h.find("--batch"), std::string::npos);
    EXPECT_EQ(h.find("--sweep_csv"), std::string::npos);
  }
  expect_contains(parse_bench({"--version"}).help_text, {"cgemm-bench"});
}

// The line every tool prints (cgemm-plan's too, test_cgemm_plan_cli): the commit says which
// source a binary, and so its reports, came from.
TEST_F(RunConfigTest, VersionLine) {
  for (const auto& [name, text] :
       {std::pair{"cgemm-run", parse({"--version"}).help_text},
        std::pair{"cgemm-bench", parse_bench({"--version"}).help_text}}) {
    EXPECT_TRUE(std::regex_match(
        text, std::regex(std::string(name) +
                         R"( [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]+(-dirty)?|unknown)\)\n)")))
        << text;
  }
}

// ---------------------------------------------------------------------------------------
// The option rows: every INI writer reads back through its reader, and the sweep list is the
// rows marked sweepable.

// A value other than the default for every option that writes an INI line: a new row that
// writes one needs an entry here.
const std::map<std::string, std::string>& non_default_values() {
  static const std::map<std::string, std::string> values{
      {"dp", "2"},
      {"tp", "4"},
      {"fsdp", "2"},
      {"batch", "8"},
      {"seq_len", "1024"},
      {"gemm", "up_proj reduce_scatter 768 3072"},
      {"dtype", "fp16"},
      {"bias", "off"},
      {"transpose_batch_sequence", "on"},
      {"std", "0.5"},
      {"seed", "18446744073709551615"},
      {"warmup", "0"},
      {"iterations", "7"},
      {"timeout", "0.25"},
      {"backend", "cpu"},
      {"gpu_sharing", "on"},
      {"transport", "ucx"},
      {"trace", "t.json"},
      {"check", "off"},
      {"check_rounds", "3"},
      {"scaling", "current"},
      {"lhs_format", "e5m2"},
      {"rhs_format", "e5m2"},
      {"amax_history_len", "16"},
      {"amax_compute_algo", "most_recent"},
      {"margin", "2"},
      {"output_dump", "out.bin"},
      {"report", "r.json"},
      {"dry_run", "on"},
      {"ranks_per_node", "4"},
      {"gpus_per_node", "2"},
      {"compute_capability", "100"},
      {"overlap", "on"},
      {"num_max_streams", "1"},
      {"compute_stream_priority", "1"},
      {"communication_stream_priority", "2"},
      {"num_sm_for_communication", "8"},
      {"use_ce", "off"},
      {"aggregate_all_gather", "on"},
      {"chunks_per_rank", "4"},
      {"experiment", "moe"},
      {"moe_tokens", "1000"},
      {"moe_experts", "16"},
      {"moe_hidden", "48"},
      {"moe_ffn", "80"},
      {"moe_router", "skewed"},
      {"moe_empty_groups", "3"},
      {"moe_check_rows", "4"},
      {"sweep_csv", "s.csv"},
      {"sweep_jsonl", "s.jsonl"},
      {"knobs", "off"},
      {"ring_bandwidth", "on"},
      {"peers", "peers.csv"},
      {"parts_max_copy_mib", "64"},
      {"parts_grouped_divide", "64"},
      {"torch_chunks", "torch.csv"},
  };
  return values;
}

template <typename Config>
std::string ini_of(const OptionRow<Config>& row, const Config& c) {
  std::ostringstream out;
  row.ini(out, c);
  return out.str();
}

// For every row of `rows` that writes INI lines: its default and a non-default value (given
// on the command line) are written, read back from an INI file by `parse`, and written again
// to the same text.
template <typename Config, typename Parse>
void expect_rows_round_trip(const std::vector<OptionRow<Config>>& rows, Parse parse,
                            const std::function<std::string(const std::string&)>& write) {
  const Config defaults = parse({});
  for (const auto& row : rows) {
    if (!row.ini) continue;
    SCOPED_TRACE(row.name);
    const std::string def = ini_of(row, defaults);
    EXPECT_EQ(ini_of(row, parse({"--config", write(def)})), def);
    const auto value = non_default_values().find(row.name);
    ASSERT_NE(value, non_default_values().end()) << "no non-default value for " << row.name;
    // output_dump needs check on; the others stand alone.
    const Config given = parse({"--" + row.name, value->second});
    const std::string text = ini_of(row, given);
    EXPECT_NE(text, def);
    EXPECT_EQ(ini_of(row, parse({"--config", write(text)})), text);
  }
}

TEST_F(RunConfigTest, EveryRowsIniWriterReadsBackItsDefaultAndAnotherValue) {
  const auto write_ini = [this](const std::string& text) { return write("row.ini", text); };
  expect_rows_round_trip(
      run_rows(), [](std::vector<std::string> args) { return parse_config(std::move(args)); },
      write_ini);
  expect_rows_round_trip(
      bench_rows(),
      [](std::vector<std::string> args) { return parse_bench(std::move(args)).config; }, write_ini);
}

// The reference pages (the README links them) name every option of cgemm-run as `name`: the
// options table of docs/RUNNING.md, or docs/MOE.md's for the MoE block; docs/SWEEPS.md names
// each sweepable option but the overlap knobs, which it refers to as a group.
std::string read_page(const std::string& name) {
  std::ifstream in(fs::path(CGEMM_SOURCE_DIR) / "docs" / name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(RunConfigTest, DocsNameEveryOption) {
  const std::string running = read_page("RUNNING.md"), moe = read_page("MOE.md"),
                    sweeps = read_page("SWEEPS.md");
  ASSERT_FALSE(running.empty() || moe.empty() || sweeps.empty()) << "a docs/ page is missing";
  const std::vector<std::string_view> overlap_knobs{"overlap",
                                                    "num_max_streams",
                                                    "compute_stream_priority",
                                                    "communication_stream_priority",
                                                    "num_sm_for_communication",
                                                    "use_ce",
                                                    "aggregate_all_gather",
                                                    "chunks_per_rank"};
  for (const auto& row : run_rows()) {
    if (row.name == "help,h") continue;  // --help, not an option of a job
    const std::string quoted = "`" + std::string(row.name) + "`";
    EXPECT_TRUE(running.find(quoted) != std::string::npos || moe.find(quoted) != std::string::npos)
        << "docs/RUNNING.md and docs/MOE.md do not name " << quoted;
    if (row.sweep == Sweep::kYes &&
        std::find(overlap_knobs.begin(), overlap_knobs.end(), row.name) == overlap_knobs.end()) {
      EXPECT_NE(sweeps.find(quoted), std::string::npos)
          << "docs/SWEEPS.md does not name " << quoted;
    }
  }
}

TEST_F(RunConfigTest, SweepListIsTheRowsMarkedSweepable) {
  std::vector<std::string_view> marked;
  for (const auto& row : run_rows()) {
    if (row.sweep == Sweep::kYes) marked.push_back(row.name);
  }
  EXPECT_EQ(run_sweepable_options(), marked);
  // In --help order, as docs/SWEEPS.md and the sweep CSV's columns list them.
  const std::vector<std::string_view> documented{"batch",
                                                 "seq_len",
                                                 "hidden_in",
                                                 "hidden_out",
                                                 "collective",
                                                 "dtype",
                                                 "scaling",
                                                 "lhs_format",
                                                 "rhs_format",
                                                 "amax_history_len",
                                                 "amax_compute_algo",
                                                 "margin",
                                                 "bias",
                                                 "transpose_batch_sequence",
                                                 "std",
                                                 "seed",
                                                 "warmup",
                                                 "iterations",
                                                 "check",
                                                 "check_rounds",
                                                 "overlap",
                                                 "num_max_streams",
                                                 "compute_stream_priority",
                                                 "communication_stream_priority",
                                                 "num_sm_for_communication",
                                                 "use_ce",
                                                 "aggregate_all_gather",
                                                 "chunks_per_rank"};
  EXPECT_EQ(run_sweepable_options(), documented);
  // Refused as lists: the mesh, the experiment and the MoE block's options (it runs one
  // experiment per job), and the backend.
  std::vector<std::string_view> refused;
  for (const auto& row : run_rows()) {
    if (row.sweep == Sweep::kRefused) refused.push_back(row.name);
  }
  EXPECT_EQ(refused, (std::vector<std::string_view>{"dp", "tp", "fsdp", "experiment", "moe_tokens",
                                                    "moe_experts", "moe_hidden", "moe_ffn",
                                                    "moe_router", "moe_empty_groups", "backend",
                                                    "gpu_sharing", "transport", "moe_check_rows"}));
  // cgemm-bench has no sweeps (--cases and --knobs are its sweep): a list is a bad value.
  expect_contains(bench_error({"--warmup", "1,2"}), {"warmup", "1,2"});
}

// One documented bound, 1 to 2^23, in both programs (8388609 and INT_MAX used to be taken:
// INT_MAX overflowed the scale state's size).
TEST_F(RunConfigTest, AmaxHistoryLenIsBounded) {
  for (const char* bad : {"0", "8388609", "100000000", "2147483647"}) {
    SCOPED_TRACE(bad);
    expect_contains(
        parse_error({"--amax_history_len", bad}),
        {std::string("--amax_history_len ") + bad, "must be 1 to 8388608 (2^23) [calls]"});
    EXPECT_EQ(bench_error({"--amax_history_len", bad}),
              run_error_as_bench({"--amax_history_len", bad}));
  }
  EXPECT_EQ(parse_config({"--amax_history_len", "8388608"}).quantization.recipe.amax_history_len,
            8388608);
}

}  // namespace
}  // namespace cgemm::launcher
