#pragma once
// cgemm-train's configuration: the shared rows of the job programs (shared_options.hpp: dp,
// backend, timeout, trace, --config and the overlap knobs; warmup, iterations and the overlap
// policy are left out, a training run has no timed repeats and picks its path with --path)
// plus its own rows (train_config.cpp), read by the same machinery (option_table.hpp): the
// same names, checks, messages and --help text for what they share with cgemm-run.

#include <cstdint>
#include <string>
#include <vector>

#include "cgemm/core/dtype.hpp"
#include "cgemm/runtime/tp_linear.hpp"
#include "common/option_table.hpp"
#include "common/output_files.hpp"
#include "common/shared_options.hpp"

namespace cgemm::launcher {

enum class Optimizer { kSgd, kAdam };

/// The largest --bucket_kib: INT_MAX fp32 values (a GradientBuckets bucket's most), in KiB
/// rounded up: 8 GiB.
constexpr int64_t kMaxBucketKib = 8388608;

/// The model: y = x + GELU(x W1 + b1) W2 + b2 on x [batch, seq_len, hidden], W1 [hidden, ffn],
/// W2 [ffn, hidden]; the target is the same block with weights of another seed (the teacher).
/// The defaults are a bare run that ends in about a second on CPU ranks.
struct TrainConfig : SharedOptions {
  int tp = 0;  // 0: world size / dp (as cgemm-run)
  int64_t batch = 4;
  int64_t seq_len = 16;
  int64_t hidden = 32;
  int64_t ffn = 64;
  int steps = 20;
  double lr = 1e-2;
  Optimizer optimizer = Optimizer::kAdam;
  DType dtype = DType::kFloat32;  // fp32 or bf16
  bool bias = true;               // b1 and b2
  uint64_t seed = 1234;
  LinearPath path = LinearPath::kOverlapped;
  int64_t bucket_kib = 25600;  // dp gradient bucket, KiB of fp32 (DDP's 25 MiB)
  int timed_passes = 0;        // forward + backward passes timed after the steps
  bool cuda_graph = false;     // steps after the first, and the timed passes, replay a graph
  // FP8 training (tp_linear.hpp's TpLinearDesc::quantization): mode none, current or delayed;
  // the forward e4m3, the gradients grad_format.
  QuantizationDesc quantization;
  DType grad_format = DType::kFloat8E5M2;
  std::string report;  // JSON report path; empty: none
};

struct TrainParseResult {
  TrainConfig config;
  bool help = false;      // --help or --version: print help_text and exit 0
  std::string help_text;  // filled when help
};

/// cgemm-train's option rows, in --help order.
const std::vector<OptionRow<TrainConfig>>& train_rows();

/// Parses argv and the --config INI file it names. Throws OptionError naming the option and
/// the value (as cgemm-run's messages do).
TrainParseResult parse_train_config(int argc, const char* const* argv);

/// Checks what needs the world size (world % dp, tp x dp = world, batch % dp, seq_len % tp,
/// ffn % tp) and resolves tp 0 to world / dp. Throws OptionError.
void resolve_train_mesh(TrainConfig& cfg, int world_size);

/// The files cgemm-train writes: the report, the trace and its SVG.
std::vector<NamedPath> train_outputs(const TrainConfig& cfg);

/// The resolved config as INI text (printed at the start; `--config` reads it back).
std::string train_ini(const TrainConfig& cfg);

const char* optimizer_name(Optimizer o);
const char* path_name(LinearPath p);

}  // namespace cgemm::launcher
