#pragma once
// Every environment variable the cgemm library reads, declared once in the registry below, and
// the one parser for them: one rule for every flag, and a typo is an error rather than a
// silent default. docs/ENVIRONMENT.md's table lists the same rows (a unit test
// compares them). A new knob is a new row here and in that table; code reads it only through
// env_flag / env_int / env_text with its row.

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace cgemm {

struct EnvKnob {
  std::string_view name;          // the variable
  std::string_view default_text;  // what unset means, as docs/ENVIRONMENT.md says it
  std::string_view meaning;       // one line: what it changes and who reads it
};

namespace env {
inline constexpr EnvKnob kGemmAutotune{
    "CGEMM_GEMM_AUTOTUNE", "1",
    "flag: time cuBLASLt's candidate algorithms once per problem and keep the fastest (0: "
    "heuristic #1)"};
inline constexpr EnvKnob kGemmCandidates{
    "CGEMM_GEMM_CANDIDATES", "8",
    "integer 1-64: how many of cuBLASLt's heuristic algorithms the autotuner times"};
inline constexpr EnvKnob kGemmLog{
    "CGEMM_GEMM_LOG", "0",
    "flag: print every tuning's candidate times (the chosen one starred) to stderr"};
inline constexpr EnvKnob kNcclMaxCtas{
    "CGEMM_NCCL_MAX_CTAS", "NCCL's default",
    "positive integer: maxCTAs of the NCCL communicators cgemm creates"};
inline constexpr EnvKnob kNcclMinCtas{
    "CGEMM_NCCL_MIN_CTAS", "NCCL's default",
    "positive integer: minCTAs of the NCCL communicators cgemm creates"};
inline constexpr EnvKnob kFp8HighPrecisionAccumulation{
    "NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION", "0",
    "Transformer Engine's: exactly 1 turns cuBLASLt's FP8 fast accumulation off; any other value "
    "leaves it on"};
inline constexpr EnvKnob kAllReduceInFp32{
    "NVTE_JAX_ALL_REDUCE_IN_FP32", "unset: float32",
    "Transformer Engine's switch: unset or not 0, a plain GEMM's all-reduce sums its float32 "
    "partials and casts once; exactly 0 rounds each rank's partial to the output dtype first "
    "(gemm.py's own default; NCCL then sums in that dtype)"};
inline constexpr EnvKnob kEnforceV2GroupedGemm{
    "NVTE_JAX_ENFORCE_V2_GROUPED_GEMM", "0",
    "Transformer Engine's: an integer; not 0 makes every grouped GEMM plan fail as gemm.py's "
    "grouped_gemm fails (cgemm has no nvte_grouped_gemm, TE's v2 kernel); not an integer fails "
    "too"};
inline constexpr EnvKnob kTestFault{
    "CGEMM_TEST_FAULT", "unset",
    "tests only: stop:RANK[:N], skip_exchange:RANK[:N] or die:RANK[:N] makes a rank stall, skip "
    "its N-th exchange or die there (SIGKILL) (the watchdog's and the dead-peer tests)"};
inline constexpr EnvKnob kTestStall{
    "CGEMM_TEST_STALL", "unset",
    "tests only: init makes every rank stall before MPI_Init, finalize:RANK makes a rank stall "
    "before MPI_Finalize, finalize_stop:RANK makes a rank stop itself (SIGSTOP) after it (the "
    "process timers' and their guard's tests)"};
inline constexpr EnvKnob kTestGpuSharing{
    "CGEMM_TEST_GPU_SHARING", "0",
    "tests only: flag: test_cuda_backend runs its ranks sharing the GPUs (copy engines, no NCCL)"};
inline constexpr EnvKnob kTestDpThroughHost{
    "CGEMM_TEST_DP_THROUGH_HOST", "0",
    "tests only: flag: the CUDA backend's dp group runs its collectives through the host over "
    "MPI, as when shared GPUs' dp group spans nodes (test_gradient_buckets)"};
inline constexpr EnvKnob kUpdateGolden{"CGEMM_UPDATE_GOLDEN", "0",
                                       "tests only: 1 makes test_golden_programs rewrite "
                                       "tests/unit/golden/ from the current programs"};
}  // namespace env

/// The registry: every knob cgemm reads (a unit test checks that every EnvKnob declared in
/// this header is listed here, and that docs/ENVIRONMENT.md's table shows each with its text).
inline constexpr std::array<const EnvKnob*, 13> kEnvKnobs{
    &env::kGemmAutotune,    &env::kGemmCandidates,       &env::kGemmLog,
    &env::kNcclMaxCtas,     &env::kNcclMinCtas,          &env::kFp8HighPrecisionAccumulation,
    &env::kAllReduceInFp32, &env::kEnforceV2GroupedGemm, &env::kTestFault,
    &env::kTestStall,       &env::kTestGpuSharing,       &env::kTestDpThroughHost,
    &env::kUpdateGolden,
};

/// The flag: std::nullopt when unset or empty; true for 1/on/true/yes and false for
/// 0/off/false/no, in any case. Any other value throws cgemm::Error naming the variable and
/// the value.
std::optional<bool> env_flag(const EnvKnob& knob);

/// The integer (decimal, optional sign): std::nullopt when unset or empty. A value that is not
/// a whole integer in range throws cgemm::Error naming the variable and the value.
std::optional<long long> env_int(const EnvKnob& knob);

/// The raw text: std::nullopt when unset or empty.
std::optional<std::string> env_text(const EnvKnob& knob);

/// Whether NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION asks for high-precision (split)
/// accumulation of FP8 GEMMs, i.e. no fast accumulation: true exactly when it is "1". Transformer
/// Engine compares the text with "1" (os.getenv(..., "0") == "1"), so any other value, "2" or
/// "true" included, leaves fast accumulation on; it never throws, unlike env_flag.
bool fp8_gemm_high_precision_accumulation();

/// Whether a plain GEMM's all-reduce sums float32 partials (issue 43: one rule on every
/// transport): true unless NVTE_JAX_ALL_REDUCE_IN_FP32 is exactly "0". Then each rank's GEMM
/// output is in the output dtype before the sum, as gemm.py's default: NCCL sums it in that
/// dtype, the CPU, copy-engine and host paths in float32. Never throws.
bool all_reduce_in_float32();

}  // namespace cgemm
