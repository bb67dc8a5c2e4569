// cgemm-train's options (launcher/train/train_config.cpp): the defaults, the shared rows it takes
// and those it leaves out, its own rows' errors (each naming the option and the value), the mesh
// rules, the shipped configs/train_demo.ini, and its INI text read back to the same config.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "train/train_config.hpp"

namespace cgemm::launcher {
namespace {

namespace fs = std::filesystem;

#ifdef CGEMM_SOURCE_DIR
const fs::path kConfigsDir = fs::path(CGEMM_SOURCE_DIR) / "configs";
#else
const fs::path kConfigsDir = fs::path(CGEMM_TEST_DATA_DIR) / ".." / ".." / "configs";
#endif

TrainParseResult parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cgemm-train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_config(static_cast<int>(argv.size()), argv.data());
}

std::string parse_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const OptionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an OptionError";
  return {};
}

std::string resolve_error(TrainConfig cfg, int world) {
  try {
    resolve_train_mesh(cfg, world);
  } catch (const OptionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an OptionError";
  return {};
}

void expect_same(const TrainConfig& a, const TrainConfig& b) {
  EXPECT_EQ(a.dp, b.dp);
  EXPECT_EQ(a.tp, b.tp);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.seq_len, b.seq_len);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.ffn, b.ffn);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.backend, b.backend);
  EXPECT_EQ(a.overlap, b.overlap);
}

TEST(TrainConfig, Defaults) {
  const TrainConfig c = parse({}).config;
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.tp, 0);
  EXPECT_EQ(c.steps, 20);
  EXPECT_EQ(c.optimizer, Optimizer::kAdam);
  EXPECT_EQ(c.dtype, DType::kFloat32);
  EXPECT_EQ(c.path, LinearPath::kOverlapped);
  EXPECT_TRUE(c.report.empty());
  EXPECT_TRUE(c.trace.empty());
}

TEST(TrainConfig, OwnOptions) {
  const TrainConfig c =
      parse({"--batch", "6",        "--seq_len", "12",   "--hidden", "24",          "--ffn",
             "48",      "--steps",  "3",         "--lr", "0.5",      "--optimizer", "sgd",
             "--dtype", "bfloat16", "--seed",    "99",   "--path",   "sequential",  "--report",
             "r.json",  "--trace",  "t.json",    "--dp", "2",        "--tp",        "3"})
          .config;
  EXPECT_EQ(c.batch, 6);
  EXPECT_EQ(c.seq_len, 12);
  EXPECT_EQ(c.hidden, 24);
  EXPECT_EQ(c.ffn, 48);
  EXPECT_EQ(c.steps, 3);
  EXPECT_EQ(c.lr, 0.5);
  EXPECT_EQ(c.optimizer, Optimizer::kSgd);
  EXPECT_EQ(c.dtype, DType::kBFloat16);
  EXPECT_EQ(c.seed, 99u);
  EXPECT_EQ(c.path, LinearPath::kSequential);
  EXPECT_EQ(c.report, "r.json");
  EXPECT_EQ(c.trace, "t.json");
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.tp, 3);
}

TEST(TrainConfig, ErrorsNameTheOptionAndTheValue) {
  EXPECT_NE(parse_error({"--optimizer", "lbfgs"}).find("--optimizer lbfgs: unknown value 'lbfgs'"),
            std::string::npos);
  EXPECT_NE(parse_error({"--dtype", "fp16"}).find("--dtype fp16: unknown value"),
            std::string::npos);
  EXPECT_NE(parse_error({"--path", "auto"}).find("--path auto"), std::string::npos);
  EXPECT_NE(parse_error({"--lr", "0"}).find("--lr 0: must be a positive finite number"),
            std::string::npos);
  EXPECT_NE(parse_error({"--lr", "nan"}).find("--lr"), std::string::npos);
  EXPECT_NE(parse_error({"--steps", "0"}).find("--steps 0"), std::string::npos);
  EXPECT_NE(parse_error({"--ffn", "0"}).find("--ffn 0"), std::string::npos);
  EXPECT_NE(parse_error({"--seed", "-1"}).find("--seed -1: must be an unsigned"),
            std::string::npos);
  EXPECT_NE(parse_error({"--bucket_kib", "0"}).find("--bucket_kib 0: must be at least 1"),
            std::string::npos);
  EXPECT_NE(parse_error({"--bucket_kib", "8388609"})
                .find("--bucket_kib 8388609: must be at most 8388608 [KiB]"),
            std::string::npos);
  EXPECT_EQ(parse({"--bucket_kib", "8388608"}).config.bucket_kib, 8388608);
  EXPECT_NE(parse_error({"--report", "a.json", "--trace", "a.json"}).find("--report"),
            std::string::npos);
}

TEST(TrainConfig, TakesTheCudaBackend) {
  // The GPU path runs on TrainOps' kernels now: --backend cuda is not refused when parsing
  // (a rank without a GPU is refused later, by the backend rule).
  EXPECT_EQ(parse({"--backend", "cuda"}).config.backend, BackendKind::kCuda);
}

TEST(TrainConfig, TakesTheSharedRowsItUsesOnly) {
  EXPECT_EQ(parse({"--num_max_streams", "1"}).config.overlap.num_max_streams, 1);
  EXPECT_EQ(parse({"--timeout", "10"}).config.timeout, 10.0);
  // A training run has no timed repeats, and --path picks the path, not the overlap policy.
  for (const char* name : {"--warmup", "--iterations", "--overlap", "--hidden_in"}) {
    EXPECT_FALSE(parse_error({name, "1"}).empty()) << name;
  }
}

TEST(TrainConfig, MeshRules) {
  TrainConfig c;
  c.batch = 4;
  c.seq_len = 16;
  c.ffn = 64;
  c.dp = 2;
  TrainConfig r = c;
  resolve_train_mesh(r, 4);
  EXPECT_EQ(r.tp, 2);
  EXPECT_NE(resolve_error(c, 3).find("--dp 2 does not divide the world size 3"), std::string::npos);
  TrainConfig t = c;
  t.tp = 4;
  EXPECT_NE(resolve_error(t, 4).find("--tp 4 x --dp 2 = 8 ranks"), std::string::npos);
  TrainConfig b = c;
  b.batch = 3;
  EXPECT_NE(resolve_error(b, 4).find("--batch 3 is not divisible by --dp 2"), std::string::npos);
  TrainConfig s = c;
  s.seq_len = 15;
  EXPECT_NE(resolve_error(s, 4).find("--seq_len 15 is not divisible by tp 2"), std::string::npos);
  TrainConfig f = c;
  f.ffn = 65;
  EXPECT_NE(resolve_error(f, 4).find("--ffn 65 is not divisible by tp 2"), std::string::npos);
}

TEST(TrainConfig, ShippedDemoConfig) {
  TrainConfig c = parse({"--config", (kConfigsDir / "train_demo.ini").string()}).config;
  EXPECT_EQ(c.dp, 2);
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.batch, 8);
  EXPECT_EQ(c.seq_len, 128);
  EXPECT_EQ(c.hidden, 128);
  EXPECT_EQ(c.ffn, 512);
  EXPECT_EQ(c.steps, 50);
  EXPECT_EQ(c.optimizer, Optimizer::kAdam);
  EXPECT_EQ(c.backend, BackendKind::kCpu);
  resolve_train_mesh(c, 4);
}

TEST(TrainConfig, IniTextReadsBackToTheSameConfig) {
  const TrainConfig c = parse({"--batch", "6", "--lr", "0.123456789012345", "--optimizer", "sgd",
                               "--dtype", "bf16", "--seed", "18446744073709551615", "--path",
                               "sequential", "--aggregate_all_gather", "on"})
                            .config;
  const fs::path file =
      fs::temp_directory_path() / ("cgemm_train_ini_" + std::to_string(::getpid()) + ".ini");
  {
    std::ofstream out(file);
    out << train_ini(c);
  }
  const TrainConfig back = parse({"--config", file.string()}).config;
  fs::remove(file);
  expect_same(back, c);
}

TEST(TrainConfig, HelpNamesTheModelAndEveryOwnOption) {
  const std::string help = parse({"--help"}).help_text;
  for (const char* s : {"cgemm-train", "GELU", "--hidden N", "--ffn N", "--steps N", "--lr X",
                        "--optimizer X", "--path X", "--report FILE", "--trace FILE"}) {
    EXPECT_NE(help.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace cgemm::launcher
