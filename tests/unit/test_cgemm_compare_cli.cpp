// The cgemm-compare binary on dumps written here byte by byte: tolerances it refuses, every
// dtype a header can name, and headers that lie about their data (sizes past the file, dims
// that are not whole numbers, tensors without elements). Also the FP8 decoding it compares.

#include <gtest/gtest.h>

#include <sys/wait.h>
#include "sanitizers.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "cgemm/core/error.hpp"
#include "common/check.hpp"

namespace cgemm::launcher {
namespace {

struct RunResult {
  std::string out;  // stdout and stderr together
  int status = -1;
  int lines() const { return static_cast<int>(std::count(out.begin(), out.end(), '\n')); }
};

RunResult run(const std::string& args, const std::string& prefix = "") {
  const std::string cmd = prefix + "\"" + CGEMM_COMPARE_BIN + "\" " + args + " 2>&1";
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

// One tensor of a dump: its header line as written (so it may lie) and its data bytes.
struct Tensor {
  std::string header;
  std::string data;
};

std::string header(const std::string& dtype, const std::string& shape, uint64_t bytes) {
  return R"({"name":"t","dtype":")" + dtype + R"(","shape":)" + shape + R"(,"bytes":)" +
         std::to_string(bytes) + "}";
}

std::string floats(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// Writes a dump named after the test and `tag`; returns its path.
std::string dump(const std::string& tag, const std::vector<Tensor>& tensors) {
  const std::string path = ::testing::TempDir() + "compare_cli_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                           tag + ".dump";
  std::ofstream f(path, std::ios::binary);
  f << "cgemm-output-dump 1\n";
  for (const Tensor& t : tensors) f << t.header << '\n' << t.data;
  return path;
}

std::string fp32_dump(const std::string& tag, const std::vector<float>& v) {
  return dump(tag, {{header("float32", "[2, 2]", v.size() * 4), floats(v)}});
}

bool has(const RunResult& r, const std::string& text) {
  return r.out.find(text) != std::string::npos;
}

// Elements that are NaN or inf fail, and the line says so: it used to say "max abs err 0"
// (the finite pairs' maximum) of dumps whose every failure was a NaN.
TEST(CompareCli, NonFiniteFailuresAreNamed) {
  const float nan = std::nanf(""), inf = INFINITY;
  const std::string a = fp32_dump("a", {1, nan, 3, inf}), b = fp32_dump("b", {1, 2, 3, 4});
  const RunResult r = run(a + " " + b);
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_TRUE(has(r,
                  "4 elements compared, 2 failures, 2 of them NaN or inf (in A or B), max "
                  "abs err 0 and max rel err 0 over the 2 finite pairs"))
      << r.out;
  EXPECT_FALSE(has(r, ", max abs err 0, max rel err 0")) << r.out;
  // Both sides NaN at the same place fail too.
  const std::string all_nan = fp32_dump("n", {nan, nan, nan, nan});
  const RunResult n = run(all_nan + " " + all_nan);
  EXPECT_EQ(n.status, 3) << n.out;
  EXPECT_TRUE(has(n, "4 failures, 4 of them NaN or inf (in A or B), no finite pair")) << n.out;
}

// 1 of 4 elements differs by 25%; the defaults find it.
TEST(CompareCli, DifferingDumpsDifferAndEqualOnesMatch) {
  const std::string a = fp32_dump("a", {1, 2, 3, 4}), b = fp32_dump("b", {1, 2, 3, 5});
  EXPECT_EQ(run(a + " " + a).status, 0);
  const RunResult r = run(a + " " + b);
  EXPECT_EQ(r.status, 3) << r.out;
  EXPECT_TRUE(has(r, "1 failures")) << r.out;
}

// `--rtol nan --atol nan` found dumps that differ to match (exit 0); a negative tolerance made
// identical dumps differ; a NaN or negative --atol_scale was ignored.
// --version prints the line every tool prints (the README says every tool has it), exit 0,
// and --help lists it.
TEST(CompareCli, VersionIsTheToolsLine) {
  const RunResult v = run("--version");
  EXPECT_EQ(v.status, 0) << v.out;
  EXPECT_TRUE(std::regex_match(
      v.out, std::regex("cgemm-compare [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit [0-9a-z-]+\\)\n")))
      << v.out;
  const RunResult h = run("--help");
  EXPECT_EQ(h.status, 0) << h.out;
  EXPECT_NE(h.out.find("--version"), std::string::npos) << h.out;
}

TEST(CompareCli, TolerancesMustBeFiniteAndNonNegative) {
  const std::string a = fp32_dump("a", {1, 2, 3, 4}), b = fp32_dump("b", {1, 2, 3, 5});
  for (const char* bad :
       {"--rtol nan --atol nan", "--rtol nan", "--atol -nan", "--rtol -1", "--atol -0.5",
        "--atol inf", "--atol_scale -1", "--atol_scale nan", "--atol_scale inf"}) {
    SCOPED_TRACE(bad);
    const RunResult r = run(std::string(bad) + " " + a + " " + b);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.lines(), 1) << r.out;
    EXPECT_TRUE(has(r, "cgemm-compare: error: --")) << r.out;
    EXPECT_TRUE(has(r, "a tolerance must be a finite number >= 0")) << r.out;
  }
  // Zero is a tolerance: exact equality.
  EXPECT_EQ(run("--rtol 0 --atol 0 --atol_scale 0 " + a + " " + a).status, 0);
  EXPECT_EQ(run("--rtol 0 --atol 0 " + a + " " + b).status, 3);
}

// float8_e4m3fn aborted (uncaught cgemm::Error from the float conversion): both FP8 dtypes
// are compared, decoded to float, with the FP8 tolerance (rtol 0.125, atol 0.625).
TEST(CompareCli, Fp8DumpsAreCompared) {
  for (const char* dtype : {"float8_e4m3fn", "float8_e5m2"}) {
    SCOPED_TRACE(dtype);
    // e4m3: 1, 2, 3, 4 and 1, 2, 3, 8; e5m2: 2, 4, 8, 16 and 2, 4, 8, 32.
    const bool e4m3 = std::string(dtype) == "float8_e4m3fn";
    const std::string same = e4m3 ? "\x38\x40\x44\x48" : "\x40\x44\x48\x4c";
    const std::string other = e4m3 ? "\x38\x40\x44\x50" : "\x40\x44\x48\x50";
    const std::string a = dump("a", {{header(dtype, "[4]", 4), same}});
    const std::string b = dump("b", {{header(dtype, "[4]", 4), other}});
    const RunResult match = run(a + " " + a);
    EXPECT_EQ(match.status, 0) << match.out;
    EXPECT_TRUE(has(match, "4 elements compared, 0 failures")) << match.out;
    EXPECT_TRUE(has(match, "(rtol 0.125, atol 0.625)")) << match.out;
    const RunResult differ = run(a + " " + b);
    EXPECT_EQ(differ.status, 3) << differ.out;
    EXPECT_TRUE(has(differ, "1 failures, max abs err " + std::string(e4m3 ? "4" : "16")))
        << differ.out;
  }
}

// float4_e2m1fn counts one byte per element in dtype_size (as gemm.py), but how a dump would
// pack it is not defined: refused with one message.
TEST(CompareCli, Fp4DumpsAreRefused) {
  const std::string a = dump("a", {{header("float4_e2m1fn", "[4]", 4), "\x01\x02\x03\x04"}});
  const RunResult r = run(a + " " + a);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.lines(), 1) << r.out;
  EXPECT_TRUE(has(r, "tensor 1: bad header line: dtype float4_e2m1fn")) << r.out;
}

// A 3 KB file claiming 2 GiB was zero-filled before being found truncated (2.1 GB resident):
// within a 100 MB address space it now gets the "truncated" message, not bad_alloc.
TEST(CompareCli, HeaderClaimingMoreThanTheFileIsRefusedBeforeAllocating) {
  const std::string big = dump(
      "big", {{header("float32", "[32768, 16384]", uint64_t{1} << 31), std::string(3000, '\0')}});
  // Under 100 MB of address space: refused before any allocation (AddressSanitizer's shadow
  // memory alone needs more, so that build checks the message without the limit).
  const RunResult r = run(big + " " + big, kUnderAddressSanitizer ? "" : "ulimit -v 100000; ");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.lines(), 1) << r.out;
  EXPECT_TRUE(has(r, "tensor 1 ('t'): truncated, 3000 of 2147483648 bytes")) << r.out;
  // A shorter lie is found the same way.
  const std::string short_by_one =
      dump("short", {{header("float32", "[2, 2]", 16), std::string(15, '\0')}});
  const RunResult s = run(short_by_one + " " + short_by_one);
  EXPECT_EQ(s.status, 2);
  EXPECT_TRUE(has(s, "truncated, 15 of 16 bytes")) << s.out;
}

// Dims [2.5, 2] were read as [2, 2]; 2.0 and a fractional or negative "bytes" alike.
TEST(CompareCli, DimsAndBytesMustBeWholeNumbers) {
  const std::string data = floats({1, 2, 3, 4});
  for (const std::string& shape : {std::string("[2.5, 2]"), std::string("[2.0, 2]"),
                                   std::string("[\"2\", 2]"), std::string("2")}) {
    SCOPED_TRACE(shape);
    const std::string a = dump("a", {{header("float32", shape, 16), data}});
    const RunResult r = run(a + " " + a);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.lines(), 1) << r.out;
    EXPECT_TRUE(has(r, "bad header line: shape")) << r.out;
  }
  for (const char* bytes : {"16.5", "-16", "\"16\""}) {
    SCOPED_TRACE(bytes);
    const std::string a = dump(
        "b", {{R"({"name":"t","dtype":"float32","shape":[2,2],"bytes":)" + std::string(bytes) + "}",
               data}});
    const RunResult r = run(a + " " + a);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(r.lines(), 1) << r.out;
    EXPECT_TRUE(has(r, "bad header line: bytes")) << r.out;
  }
}

// 2^62 + 1 float32 elements: the byte count wrapped to 4 and the 4 data bytes passed.
TEST(CompareCli, ByteCountThatOverflowsIsRefused) {
  const std::string a =
      dump("wrap", {{header("float32", "[4611686018427387905]", 4), floats({1})}});
  const RunResult r = run(a + " " + a);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.lines(), 1) << r.out;
  EXPECT_TRUE(has(r, "wrap")) << r.out;
  EXPECT_TRUE(has(r, "tensor 1: bad header line: shape [4611686018427387905] of float32")) << r.out;
}

// A tensor name with an escape byte reached the terminal raw: it is shown as \x1b.
TEST(CompareCli, TensorNamesAreShownPrintable) {
  const std::string h = R"({"name":"t\u001b[31m","dtype":"float32","shape":[1],"bytes":4})";
  const std::string a = dump("esc", {{h, floats({1})}});
  const RunResult r = run(a + " " + a);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_TRUE(has(r, "MATCH  t\\x1b[31m [1]")) << r.out;
  const std::string b = dump("esc_b", {{h, ""}});
  const RunResult cut = run(b + " " + b);
  EXPECT_EQ(cut.status, 2) << cut.out;
  EXPECT_EQ(cut.out.find('\x1b'), std::string::npos) << cut.out;
}

// A tensor of shape [0, 2] "differed" from itself (exit 3: nothing compared): refused as a
// header no cgemm-run writes, as a dump without tensors is.
TEST(CompareCli, ZeroElementTensorsAreRefused) {
  const std::string a = dump("a", {{header("float32", "[0, 2]", 0), ""}});
  const RunResult r = run(a + " " + a);
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.lines(), 1) << r.out;
  EXPECT_TRUE(has(r, "shape [0,2] has no elements: nothing to compare")) << r.out;
}

TEST(CompareCli, HelpStatesTheLimits) {
  const RunResult r = run("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(has(r, "finite and >= 0")) << r.out;
  EXPECT_TRUE(has(r, "float8_e4m3fn")) << r.out;
}

// The FP8 decoding against values of the formats' definitions (OCP FP8: E4M3 without
// infinities, NaN at S.1111.111; E5M2 as IEEE half's high byte).
TEST(CheckValues, Fp8Decoding) {
  const uint8_t e4m3[] = {0x38, 0x40, 0x7e, 0x01, 0x08, 0xb8, 0x80, 0x7f, 0xff};
  const std::vector<float> a = values_as_float(e4m3, DType::kFloat8E4M3, 9);
  EXPECT_EQ(a[0], 1.0f);
  EXPECT_EQ(a[1], 2.0f);
  EXPECT_EQ(a[2], 448.0f);                // the largest
  EXPECT_EQ(a[3], std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(a[4], std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(a[5], -1.0f);
  EXPECT_EQ(a[6], 0.0f);
  EXPECT_TRUE(std::signbit(a[6]));
  EXPECT_TRUE(std::isnan(a[7]));
  EXPECT_TRUE(std::isnan(a[8]));
  const uint8_t e5m2[] = {0x3c, 0x7b, 0x01, 0x7c, 0xfc, 0x7e, 0xc0};
  const std::vector<float> b = values_as_float(e5m2, DType::kFloat8E5M2, 7);
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], 57344.0f);               // the largest
  EXPECT_EQ(b[2], std::ldexp(1.0f, -16));  // the smallest subnormal
  EXPECT_EQ(b[3], INFINITY);
  EXPECT_EQ(b[4], -INFINITY);
  EXPECT_TRUE(std::isnan(b[5]));
  EXPECT_EQ(b[6], -2.0f);
  EXPECT_THROW(values_as_float(e4m3, DType::kFloat4E2M1, 1), Error);
}

}  // namespace
}  // namespace cgemm::launcher
