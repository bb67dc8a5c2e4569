// cgemm-train's options: the shared rows (shared_options.cpp) less those a training run has no
// use for, plus the model's, the optimizer's and the outputs'.

#include "train_config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <sstream>
#include <string_view>

#include <boost/program_options.hpp>

namespace cgemm::launcher {

namespace po = boost::program_options;

namespace {

using Row = OptionRow<TrainConfig>;
using G = OptionGroup;

// The shortest text that reads back as the same double (so the INI text round-trips exactly).
std::string shortest(double v) {
  char text[64];
  const auto [end, ec] = std::to_chars(text, text + sizeof(text), v);
  return ec == std::errc() ? std::string(text, end) : std::to_string(v);
}

// A choice among `choices`' names for the value `field(config)` refers to.
template <typename T, size_t N, typename F>
Row choice_row(std::string name, G group, std::string help,
               std::array<std::pair<std::string_view, T>, N> choices, F field) {
  auto text_of = [choices](T v) {
    for (const auto& [n, c] : choices) {
      if (c == v) return std::string(n);
    }
    return std::string("?");
  };
  return Row{name,
             group,
             std::move(help),
             "",
             true,
             Sweep::kPlain,
             [=](const TrainConfig& d) {
               return po::value<std::string>()->value_name("X")->default_value(text_of(field(d)));
             },
             [=](const OptionReader& r, TrainConfig& c) {
               const auto text = r.get<std::string>(name);
               for (const auto& [n, v] : choices) {
                 if (n == text) {
                   field(c) = v;
                   return;
                 }
               }
               std::string known;
               for (const auto& [n, v] : choices)
                 known += (known.empty() ? "" : ", ") + std::string(n);
               r.fail(name, text, "unknown value '" + text + "' (known: " + known + ")");
             },
             [=](std::ostream& out, const TrainConfig& c) {
               out << name << " = " << text_of(field(c)) << "\n";
             }};
}

template <typename T, size_t N>
Row choice_row(std::string name, G group, std::string help,
               std::array<std::pair<std::string_view, T>, N> choices, T TrainConfig::*member) {
  return choice_row<T, N>(
      std::move(name), group, std::move(help),
      choices, [member](auto& c) -> auto& { return c.*member; });
}

template <typename T, typename Field>
Row number(std::string name, G group, const char* value_name, std::string unit, std::string help,
           Field field, T min, std::string what) {
  return number_row<TrainConfig, T>(std::move(name), group, value_name, std::move(unit),
                                    std::move(help), field, min, std::move(what), Sweep::kPlain);
}

std::vector<Row> own_rows() {
  std::vector<Row> rows;
  Row tp = number<int>(
      "tp", G::kMesh, "N", "ranks",
      "tensor-parallel size: ranks of one TP group, over which the MLP's collectives run; "
      "0 = world size / (dp x fsdp)",
      [](auto& c) -> auto& { return c.tp; }, 0,
      "must be 0 (world size / (dp x fsdp)) or a positive number of ranks");
  tp.ini = [](std::ostream& out, const TrainConfig& c) {
    out << "tp = " << c.tp << (c.tp == 0 ? "  # world size / (dp x fsdp)" : "") << "\n";
  };
  rows.push_back(std::move(tp));
  rows.push_back(number<int>(
      "fsdp", G::kMesh, "N", "ranks",
      "fully sharded data-parallel size: ranks of one replica that split the batch and shard "
      "W1 and W2 with their gradients, fp32 masters and Adam moments (1/N each); each layer's "
      "GEMMs gather the weight as they run and reduce-scatter its gradient (docs/FSDP.md); "
      "world = dp x fsdp x tp",
      [](auto& c) -> auto& { return c.fsdp; }, 1, "must be at least 1 [ranks]"));

  rows.push_back(number<int64_t>(
      "batch", G::kProblem, "N", "sequences",
      "global batch size B, split over dp x fsdp; B / (dp x fsdp) must be 1 or a multiple of "
      "dp (gemm.py's sequence-parallel reorder)",
      [](auto& c) -> auto& { return c.batch; }, 1, "must be at least 1 [sequences]"));
  rows.push_back(number<int64_t>(
      "seq_len", G::kProblem, "N", "tokens", "sequence length S, sharded over tp",
      [](auto& c) -> auto& { return c.seq_len; }, 1, "must be at least 1 [tokens]"));
  rows.push_back(number<int64_t>(
      "hidden", G::kProblem, "N", "elements",
      "model width H: x, the block's output and the target are [B, S, H]",
      [](auto& c) -> auto& { return c.hidden; }, 1, "must be at least 1 [elements]"));
  rows.push_back(number<int64_t>(
      "ffn", G::kProblem, "N", "elements",
      "MLP width F: the up projection H -> F (all-gather GEMM, F sharded over tp), the down "
      "projection F -> H (reduce-scatter GEMM)",
      [](auto& c) -> auto& { return c.ffn; }, 1, "must be at least 1 [elements]"));
  rows.push_back(bool_row<TrainConfig>(
      "bias", G::kProblem,
      "on | off: the biases b1 [F] and b2 [H] (off: y = x + GELU(x W1) W2, the block the "
      "PyTorch peer bench/peers/torch_train_mlp.py times by default)",
      [](auto& c) -> auto& { return c.bias; }, Sweep::kPlain));
  rows.push_back(choice_row<DType, 4>(
      "dtype", G::kProblem,
      "element type of the activations, weights and gradients: fp32 | bf16 (or float32, "
      "bfloat16); the optimizer keeps fp32 master weights either way",
      {{{"fp32", DType::kFloat32},
        {"bf16", DType::kBFloat16},
        {"float32", DType::kFloat32},
        {"bfloat16", DType::kBFloat16}}},
      &TrainConfig::dtype));
  rows.push_back(choice_row<ScalingMode, 3>(
      "scaling", G::kProblem,
      "FP8 training, as Transformer Engine's fp8_autocast: none | current | delayed. Every GEMM "
      "of both layers, forward and backward, runs in FP8 with one scale per global tensor "
      "(current: from this call's amax; delayed: from the amax history of earlier calls, "
      "--amax_history_len); the forward e4m3 x e4m3, dy in --grad_format. Each weight is "
      "quantized once per step into both layouts (its forward and its dgrad read the same "
      "copy); the all-gathers move FP8 bytes. The teacher stays in --dtype. Not with --fsdp",
      {{{"none", ScalingMode::kNoScaling},
        {"current", ScalingMode::kCurrentTensorScaling},
        {"delayed", ScalingMode::kDelayedTensorScaling}}},
      [](auto& c) -> auto& { return c.quantization.mode; }));
  rows.push_back(choice_row<DType, 2>(
      "grad_format", G::kProblem,
      "FP8 format of the gradients dy in the backward GEMMs with --scaling: e5m2 (TE's HYBRID "
      "recipe, its default for training) | e4m3 (every operand e4m3)",
      {{{"e5m2", DType::kFloat8E5M2}, {"e4m3", DType::kFloat8E4M3}}}, &TrainConfig::grad_format));
  const std::string history_bound =
      "must be 1 to " + std::to_string(kMaxAmaxHistoryLen) + " (2^23) [calls]";
  Row history = number<int>(
      "amax_history_len", G::kProblem, "N", "calls",
      "--scaling delayed: amaxes of the last N calls each tensor's scale is taken from (the "
      "max of them), 1 to 2^23 (TE's DelayedScaling default 1024)",
      [](auto& c) -> auto& { return c.quantization.recipe.amax_history_len; }, 1, history_bound);
  history.read = [history_bound](const OptionReader& r, TrainConfig& c) {
    const int n = r.get<int>("amax_history_len");
    if (n < 1 || n > kMaxAmaxHistoryLen)
      r.fail("amax_history_len", std::to_string(n), history_bound);
    c.quantization.recipe.amax_history_len = n;
  };
  rows.push_back(std::move(history));
  rows.push_back(
      Row{"seed", G::kProblem,
          "seed of the student's weights and of the inputs (the teacher's weights use seed + "
          "1000); every rank draws its shards of the same global tensors, so every mesh trains "
          "the same model",
          "unsigned integer", true, Sweep::kPlain,
          [](const TrainConfig& d) {
            return po::value<std::string>()->value_name("N")->default_value(std::to_string(d.seed));
          },
          [](const OptionReader& r, TrainConfig& c) {
            const auto text = r.get<std::string>("seed");
            uint64_t v = 0;
            const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
            if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
              r.fail("seed", text, "must be an unsigned 64-bit integer");
            }
            c.seed = v;
          },
          [](std::ostream& out, const TrainConfig& c) { out << "seed = " << c.seed << "\n"; },
          ValueKind::kInteger});

  rows.push_back(number<int>(
      "steps", G::kRun, "N", "steps", "optimizer steps, each on a fresh batch of inputs",
      [](auto& c) -> auto& { return c.steps; }, 1, "must be at least 1 [steps]"));
  rows.push_back(
      Row{"lr", G::kRun, "learning rate of the optimizer", "", true, Sweep::kPlain,
          [](const TrainConfig& d) {
            return po::value<double>()->value_name("X")->default_value(d.lr, shortest(d.lr));
          },
          [](const OptionReader& r, TrainConfig& c) {
            c.lr = r.get<double>("lr");
            if (!std::isfinite(c.lr) || !(c.lr > 0)) {
              r.fail("lr", shortest(c.lr), "must be a positive finite number");
            }
          },
          [](std::ostream& out, const TrainConfig& c) { out << "lr = " << shortest(c.lr) << "\n"; },
          ValueKind::kNumber});
  rows.push_back(choice_row<Optimizer, 2>(
      "optimizer", G::kRun,
      "sgd (w -= lr g) | adam (beta1 0.9, beta2 0.999, eps 1e-8, bias-corrected)",
      {{{"sgd", Optimizer::kSgd}, {"adam", Optimizer::kAdam}}}, &TrainConfig::optimizer));
  rows.push_back(choice_row<LinearPath, 2>(
      "path", G::kRun,
      "overlapped | sequential: how each GEMM of the layers runs (the collective inside the "
      "GEMM's chunks, or the collective then the GEMM or the reverse)",
      {{{"overlapped", LinearPath::kOverlapped}, {"sequential", LinearPath::kSequential}}},
      &TrainConfig::path));
  rows.push_back(number<int64_t>(
      "bucket_kib", G::kRun, "N", "KiB",
      "size of a data-parallel gradient bucket, in KiB of fp32 values: the gradients are summed "
      "over dp in buckets, each bucket's all-reduce started as soon as its last gradient is "
      "ready (down_proj's during up_proj's backward), as PyTorch DDP does (its default 25 MiB); "
      "a gradient larger than a bucket is a bucket of its own; at most 8388608 (8 GiB)",
      [](auto& c) -> auto& { return c.bucket_kib; }, 1, "must be at least 1 [KiB]"));
  rows.push_back(number<int>(
      "timed_passes", G::kRun, "N", "passes",
      "after the last step, time N more forward and backward passes of the block on the last "
      "step's inputs (no update and no dp gradient all-reduce; the backend's timer: CUDA "
      "events on a GPU), after 3 untimed ones, and print their median (the slowest rank's) "
      "with the job's tokens/s and TFLOP/s; 0 = none",
      [](auto& c) -> auto& { return c.timed_passes; }, 0, "must be 0 or more [passes]"));
  rows.push_back(bool_row<TrainConfig>(
      "cuda_graph", G::kRun,
      "on | off: capture the training step into a CUDA graph once, after the first step (run "
      "eagerly: it chooses the GEMM algorithms and makes every buffer), and replay it for every "
      "later step: the teacher's targets, the forward pass, the loss and dL/dy (left on the "
      "device), the backward pass, the dp gradient sum and the optimizer. Outside the graph, "
      "per step: the inputs drawn, Adam's bias corrections copied in, and the loss read once "
      "after the replay (its sum over the job on the host). The timed passes are a captured "
      "forward and backward pass. The losses equal those of off bit for bit. The CPU backend "
      "emulates graphs (a replay runs the step again); refused, with the reason, where the "
      "step cannot be captured (a dp group through the host)",
      [](auto& c) -> auto& { return c.cuda_graph; }, Sweep::kPlain));
  rows.push_back(path_row<TrainConfig>(
      "report", G::kRun, "FILE",
      "write the resolved options, the per-step losses (\"losses\") and the timings as JSON to "
      "this file",
      [](auto& c) -> auto& { return c.report; }));
  return rows;
}

// The shared rows cgemm-train takes, some with its own help.
std::vector<Row> shared_train_rows() {
  std::vector<Row> out;
  for (Row& r : widen<TrainConfig>(shared_rows())) {
    if (r.name == "warmup" || r.name == "iterations" || r.name == "overlap") continue;
    if (r.name == "trace") {
      r.help =
          "after the last step, record one more forward and backward pass of the block on every "
          "rank (each layer's GEMM chunks, transfers and collectives; the GELU, loss and "
          "optimizer are not drawn) and write it as Chrome trace-event JSON to FILE and as an "
          "SVG timeline to FILE.svg";
    }
    out.push_back(std::move(r));
  }
  return out;
}

TrainConfig read_train_config(const OptionReader& r) {
  TrainConfig cfg = read_rows(train_rows(), r);
  // A bucket holds at most INT_MAX fp32 values (GradientBuckets: one all-reduce's count), so
  // any size past 8 GiB means the same; refusing it also keeps KiB x 1024 inside size_t, which
  // a larger value wraps (2^54 KiB became 0 bytes, 2^54 + 1 KiB 1 KiB buckets, silently).
  if (cfg.bucket_kib > kMaxBucketKib) {
    r.fail("bucket_kib", std::to_string(cfg.bucket_kib),
           "must be at most " + std::to_string(kMaxBucketKib) +
               " [KiB] (8 GiB: a bucket holds at most INT_MAX fp32 values)");
  }
  check_distinct(train_outputs(cfg), {{"--config", cfg.config_file}});
  return cfg;
}

ProgramSpec train_program_spec() {
  ProgramSpec spec;
  spec.name = "cgemm-train";
  spec.usage =
      "Usage: mpirun -np N cgemm-train [--config FILE] [--NAME VALUE]...\n"
      "Trains an MLP block with a residual, y = x + GELU(x W1 + b1) W2 + b2, on a synthetic\n"
      "regression task: the targets are the same block with fixed random weights (the\n"
      "teacher), the loss the mean of (y - target)^2 over every element of the global batch.\n"
      "Tensor-sequence parallel over tp (x sharded over the sequence; the up projection an\n"
      "all-gather GEMM, the down projection a reduce-scatter GEMM), data parallel over dp (the\n"
      "weight gradients summed over dp in buckets, each all-reduced as soon as its gradients\n"
      "are ready; with --fsdp inside the gradient GEMMs), fully sharded over fsdp (W1, W2,\n"
      "their gradients and optimizer state split over the fsdp ranks; each forward GEMM\n"
      "gathers its weight as it runs, the weight gradients are reduce-scattered). Every mesh\n"
      "draws the same global weights and inputs, so it trains the same model as one rank.\n"
      "Everything runs on the backend: on a GPU the elementwise steps and\n"
      "the optimizer are kernels. Rank 0 prints the loss of every step, then tokens per second,\n"
      "the share of the step time in each layer call (GEMMs with their collectives), GELU, the\n"
      "loss, the wait for the dp buckets and the optimizer, and each layer call's GEMM and\n"
      "communication time from one traced pass.\n"
      "Options come from the command line, then from the INI file of --config (same names,\n"
      "'NAME = VALUE'), then from the defaults shown as (=...). Units are in [brackets].\n"
      "The options of the General, Mesh and Overlap groups are cgemm-run's.\n";
  spec.notes =
      "Exit status: 0 done, 2 bad options or a shape the planner refuses, 4 a wait past\n"
      "--timeout, 5 training diverged (a step's loss is NaN or infinite: the run stops there,\n"
      "and the report gives that step under \"diverged\" and such losses as strings).\n\n" +
      file_notes();
  spec.mesh_caption =
      "Mesh (world size = dp x fsdp x tp; a TP group is tp consecutive ranks, an FSDP group the "
      "ranks of one tp rank in one replica)";
  spec.problem_caption =
      "Problem (y = x + GELU(x W1 + b1) W2 + b2; x [batch, seq_len, hidden], W1 [hidden, ffn])";
  spec.options = entries_of(train_rows(), TrainConfig());
  return spec;  // no sweeps
}

}  // namespace

const char* optimizer_name(Optimizer o) { return o == Optimizer::kSgd ? "sgd" : "adam"; }
const char* path_name(LinearPath p) {
  return p == LinearPath::kSequential   ? "sequential"
         : p == LinearPath::kOverlapped ? "overlapped"
                                        : "policy";
}

const std::vector<OptionRow<TrainConfig>>& train_rows() {
  static const std::vector<Row> rows = table_of(shared_train_rows(), own_rows());
  return rows;
}

TrainParseResult parse_train_config(int argc, const char* const* argv) {
  TrainParseResult result;
  const ParsedOptions parsed =
      parse_options(train_program_spec(), argc, argv,
                    [&](const OptionReader& r) { result.config = read_train_config(r); });
  result.help = parsed.help;
  result.help_text = parsed.help_text;
  return result;
}

void resolve_train_mesh(TrainConfig& cfg, int world_size) {
  resolve_dp_tp(cfg.tp, cfg.dp, cfg.batch, cfg.seq_len, world_size,
                cfg.fsdp == 1 ? "each data-parallel group trains on batch / dp sequences"
                              : "each data-parallel rank trains on batch / (dp x fsdp) sequences",
                cfg.fsdp);
  const std::string tp = std::to_string(cfg.tp);
  if (cfg.ffn % cfg.tp != 0) {
    throw OptionError("--ffn " + std::to_string(cfg.ffn) + " is not divisible by tp " + tp +
                      " (the up projection's output and the down projection's input are "
                      "sharded over the tensor-parallel group)");
  }
  // gemm.py's sequence-parallel reorders (_reorder_tpsp_leading / _reorder_dp_leading) reshape
  // each rank's batch by dp: it must be 1 or a multiple of dp. The planner refuses it too, in
  // gemm.py's words; this names the option.
  const int64_t local = cfg.batch / (static_cast<int64_t>(cfg.dp) * cfg.fsdp);
  if (local != 1 && local % cfg.dp != 0) {
    throw OptionError("--batch " + std::to_string(cfg.batch) + " on --dp " +
                      std::to_string(cfg.dp) +
                      (cfg.fsdp == 1 ? "" : " x --fsdp " + std::to_string(cfg.fsdp)) +
                      ": each data-parallel rank's " + std::to_string(local) +
                      " sequences must be 1 or a multiple of dp " + std::to_string(cfg.dp) +
                      " (gemm.py's sequence-parallel reorder reshapes the local batch by dp)");
  }
}

std::vector<NamedPath> train_outputs(const TrainConfig& cfg) {
  std::vector<NamedPath> out{{"--report", cfg.report}, {"--trace", cfg.trace}};
  if (!cfg.trace.empty()) out.push_back({"--trace's SVG", cfg.trace + ".svg"});
  return out;
}

std::string train_ini(const TrainConfig& cfg) {
  std::ostringstream out;
  write_ini(out, train_rows(), cfg);
  return out.str();
}

}  // namespace cgemm::launcher
