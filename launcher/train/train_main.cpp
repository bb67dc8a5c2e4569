// cgemm-train: trains the MLP block of train_model.hpp on the dp x tp mesh for --steps steps
// and reports the loss of every step and where the step time went. Its phases end in the
// all-ranks agreement as cgemm-run's do (job.hpp): errors every rank sees alike (options,
// mesh, planner rules) end the job with one message and exit 2; an error of one rank (a
// transport fault) aborts the job.

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/quantization_names.hpp"
#include "common/dry_run.hpp"
#include "common/job.hpp"
#include "common/mpi_session.hpp"
#include "common/output_files.hpp"
#include "common/report_json.hpp"
#include "common/trace_writer.hpp"
#include "trace_split.hpp"
#include "train_config.hpp"
#include "train_model.hpp"

namespace cgemm::launcher {
namespace {

constexpr int kPhases = static_cast<int>(Phase::kCount);
constexpr int kUntimedPasses = 3;  // warm-up of --timed_passes

// The median of this rank's times, then the largest over the job (the pass ends when the
// slowest rank does).
double slowest_median(const std::vector<double>& ms) {
  double m = median(ms);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce(timed passes)");
  return m;
}

std::string fmt(const char* format, double a, double b = 0.0, double c = 0.0) {
  char line[256];
  std::snprintf(line, sizeof(line), format, a, b, c);
  return line;
}

// JSON has no NaN or infinity (nlohmann writes null): such a loss is written as a string.
nlohmann::json loss_json(double loss) {
  if (std::isfinite(loss)) return loss;
  return std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf";
}

nlohmann::json losses_json(const std::vector<double>& losses) {
  nlohmann::json a = nlohmann::json::array();
  for (double l : losses) a.push_back(loss_json(l));
  return a;
}

nlohmann::json config_json(const TrainConfig& cfg) {
  return {{"dp", cfg.dp},
          {"fsdp", cfg.fsdp},
          {"tp", cfg.tp},
          {"batch", cfg.batch},
          {"seq_len", cfg.seq_len},
          {"hidden", cfg.hidden},
          {"ffn", cfg.ffn},
          {"steps", cfg.steps},
          {"lr", cfg.lr},
          {"optimizer", optimizer_name(cfg.optimizer)},
          {"dtype", cfg.dtype == DType::kFloat32 ? "fp32" : "bf16"},
          {"seed", cfg.seed},
          {"path", path_name(cfg.path)},
          {"bias", cfg.bias},
          {"timed_passes", cfg.timed_passes},
          {"bucket_kib", cfg.bucket_kib},
          {"scaling", scaling_option_name(cfg.quantization.mode)},
          {"grad_format", fp8_format_name(cfg.grad_format)},
          {"amax_history_len", cfg.quantization.recipe.amax_history_len},
          {"config",
           cfg.config_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(cfg.config_file)}};
}

// What the phases of a run share.
struct TrainRun {
  TrainRun(const TrainConfig& c, int w) : cfg(c), world(w) {}
  const TrainConfig& cfg;
  int world = 1;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<MlpTrainer> trainer;
  std::vector<double> losses, step_ms;
  double phase_ms[kPhases] = {};
  int diverged_step = 0;  // the first step whose loss is not finite; 0: none
  std::vector<TraceSpan> trace;
  std::vector<double> pass_ms;
  double pass_median_ms = 0.0;
  std::vector<CallSplit> splits;
};

// The mesh in words: "dp 2 x tp 2", "dp 1 x fsdp 2 x tp 2".
std::string mesh_words(const TrainConfig& cfg) {
  return "dp " + std::to_string(cfg.dp) +
         (cfg.fsdp > 1 ? " x fsdp " + std::to_string(cfg.fsdp) : std::string()) + " x tp " +
         std::to_string(cfg.tp);
}

// The MLP block in words, for messages.
std::string block_words(const TrainConfig& cfg) {
  return "batch " + std::to_string(cfg.batch) + ", seq_len " + std::to_string(cfg.seq_len) +
         ", hidden " + std::to_string(cfg.hidden) + ", ffn " + std::to_string(cfg.ffn);
}

// Before any buffer, the ranks sharing a host (CPU) or a GPU (CUDA), as cgemm-run's check (a
// block too large for a cgroup was OOM-killed without a word). A shape the planner refuses is
// left to plan(), which names the block. False: refused on every rank.
bool memory_fits(const TrainRun& r) {
  const TrainConfig& cfg = r.cfg;
  std::string error;
  int64_t mine = -1;
  try {
    mine = MlpTrainer::bytes_needed(*r.ctx, cfg);
  } catch (const Error&) {
    // Planned alike on every rank: they all skip the check.
  }
  if (mine >= 0) {
    const MemoryCheck c = check_shared_memory(*r.ctx, mine);
    if (!c.ok) {
      error = c.message + " (the MLP block: " + block_words(cfg) + ", " +
              std::string(dtype_name(cfg.dtype)) + " on " + mesh_words(cfg) + "; each rank needs " +
              std::to_string(mine) +
              " bytes for its activations, weights, optimizer state and GEMM plans; nothing "
              "was allocated)";
    }
  }
  return !any_rank_failed(error);
}

// The block's plans: the planner's refusals are the same on every rank. False: refused.
bool plan(TrainRun& r) {
  const TrainConfig& cfg = r.cfg;
  if (!all_ranks_ok([&] {
        try {
          r.trainer = std::make_unique<MlpTrainer>(*r.ctx, cfg);
        } catch (const PlanError& e) {
          // The planner's message names its rule, not the block: say which shape it refused.
          throw Error("the planner refuses the MLP block (" + block_words(cfg) + " on " +
                      mesh_words(cfg) + "): " + e.what());
        }
      })) {
    return false;
  }
  say("up_proj:   " + r.trainer->up().forward_plan().schedule_summary());
  say("down_proj: " + r.trainer->down().forward_plan().schedule_summary());
  if (r.trainer->dp_buckets() != nullptr) {
    std::string buckets = r.trainer->dp_buckets()->describe();
    while (!buckets.empty() && buckets.back() == '\n') buckets.pop_back();
    say("dp gradient buckets (" + std::to_string(cfg.bucket_kib) + " KiB):\n" + buckets);
  }
  if (cfg.fsdp > 1 && cfg.dp > 1) {
    say("dp gradient sum: inside the gradient GEMMs (HSDP: each wgrad's reduce-scatter over "
        "fsdp, then an all-reduce over dp; the bias gradients all-reduced over fsdp and dp); no "
        "buckets");
  }
  const StateBytes b = r.trainer->state_bytes();
  const auto ratio = [&](int64_t x) {
    return static_cast<double>(x) / static_cast<double>(b.weights_replicated);
  };
  say(fmt("memory per rank: W1, W2 with gradients, masters and optimizer state %.0f bytes (%.4f "
          "of the %.0f a replicated run holds)",
          static_cast<double>(b.weights), ratio(b.weights),
          static_cast<double>(b.weights_replicated)) +
      (cfg.fsdp > 1 ? fmt("; with FSDP's buffers (%.0f bytes: the shared gathered weight and "
                          "reorder buffer, the wgrads' send slots) %.4f of it",
                          static_cast<double>(b.gathered), ratio(b.weights + b.gathered))
                    : std::string()) +
      fmt("; b1, b2 with theirs %.0f bytes (replicated)", static_cast<double>(b.biases)));
  return true;
}

// The steps, each one's loss printed; stops at the first loss that is not finite (the loss is
// summed over the job: every rank stops at the same step). An error aborts the job.
void train(TrainRun& r) {
  try {
    for (int s = 0; s < r.cfg.steps; ++s) {
      // --cuda_graph: the first step runs eagerly (it chooses the GEMM algorithms and makes
      // every buffer the capture then names); the later ones replay its capture.
      const StepResult res =
          r.cfg.cuda_graph && s > 0 ? r.trainer->step_graphed(s) : r.trainer->step(s);
      double total = 0.0;
      for (int p = 0; p < kPhases; ++p) {
        r.phase_ms[p] += res.phase_ms[p];
        total += res.phase_ms[p];
      }
      r.losses.push_back(res.loss);
      r.step_ms.push_back(total);
      say(fmt("step %4.0f  loss %.9g", s + 1, res.loss));
      // Steps after a NaN or an infinity only carry it on; the run has failed.
      if (!std::isfinite(res.loss)) {
        r.diverged_step = s + 1;
        break;
      }
    }
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
}

// The report's fields every run has.
nlohmann::json report_head(const TrainRun& r) {
  nlohmann::json report = provenance_json();
  report["program"] = "cgemm-train";
  report["config"] = config_json(r.cfg);
  report["world_size"] = r.world;
  report["backend"] = r.ctx->backend().name();
  report["transport"] = r.ctx->backend().transport();
  report["losses"] = losses_json(r.losses);
  return report;
}

// Rank 0 writes the report; false: it could not (every rank returns kExitUsage).
bool write_report(const TrainConfig& cfg, const nlohmann::json& report) {
  return all_ranks_ok([&] {
    if (world_rank() != 0) return;
    write_replacing("--report", cfg.report, report.dump(2) + "\n");
    say("report written to " + cfg.report);
  });
}

// A run that diverged: one message, the report with its losses as they were, exit 5.
int end_diverged(TrainRun& r) {
  const double loss = r.losses.back();
  const std::string lr = nlohmann::json(r.cfg.lr).dump();
  any_rank_failed("training diverged: the loss of step " + std::to_string(r.diverged_step) +
                  " is " + loss_json(loss).get<std::string>() + " (lr " + lr + ", optimizer " +
                  std::string(optimizer_name(r.cfg.optimizer)) +
                  "); the run stopped there (exit status 5)");
  if (!r.cfg.report.empty()) {
    nlohmann::json report = report_head(r);
    report["diverged"] = {{"step", r.diverged_step}, {"loss", loss_json(loss)}};
    report["step_ms"] = r.step_ms;
    if (!write_report(r.cfg, report)) return kExitUsage;
  }
  r.trainer.reset();
  return kExitDiverged;
}

// One traced pass (the split of each layer call into GEMM and communication time; the trace
// file only with --trace), the timed passes, and the slowest rank's times. An error aborts.
void measure(TrainRun& r) {
  try {
    r.trace = r.trainer->trace_pass();
    for (const CallSplit& c : split_calls(r.trace)) {
      double v[6] = {c.wall_ms, c.gemm_ms, c.comm_ms, c.hidden_ms, c.fsdp_ms, c.fsdp_hidden_ms};
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, 6, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                "MPI_Allreduce(call split)");
      r.splits.push_back({c.call, v[0], v[1], v[2], v[3], v[4], v[5]});
    }
    if (r.cfg.timed_passes > 0) {
      const auto pass = [&] {
        return r.cfg.cuda_graph ? r.trainer->timed_pass_graphed() : r.trainer->timed_pass();
      };
      for (int i = 0; i < kUntimedPasses; ++i) pass();
      for (int i = 0; i < r.cfg.timed_passes; ++i) r.pass_ms.push_back(pass());
      r.pass_median_ms = slowest_median(r.pass_ms);
    }
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, r.phase_ms, kPhases, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce(phase times)");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, r.step_ms.data(), static_cast<int>(r.step_ms.size()),
                            MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce(step times)");
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
}

// The summary lines, and the report (with --report) and trace (with --trace). Returns the
// exit status.
int summarize(TrainRun& r) {
  const TrainConfig& cfg = r.cfg;
  double total_ms = 0.0;
  for (double t : r.step_ms) total_ms += t;
  const double tokens = static_cast<double>(cfg.batch) * static_cast<double>(cfg.seq_len);
  const double tokens_per_s = total_ms > 0 ? tokens * cfg.steps / (total_ms * 1e-3) : 0.0;
  const double ratio = r.losses.front() > 0 ? r.losses.back() / r.losses.front() : 0.0;
  say(fmt("loss %.6g -> %.6g after %.0f steps", r.losses.front(), r.losses.back(), cfg.steps) +
      fmt(" (%.1f%% of the first)", 100.0 * ratio));
  // The step time includes drawing the inputs and the teacher's forward pass (the targets).
  say(fmt("%.0f tokens per step, %.3f ms per step (mean of the slowest rank's), %.0f tokens/s",
          tokens, total_ms / cfg.steps, tokens_per_s) +
      " (a step counts every phase below, the inputs and the teacher's targets included)");
  // A forward and backward pass: 3 GEMMs per projection (forward, dgrad, wgrad), each 2 T H F
  // flops over the job's T tokens.
  const double pass_flops =
      3.0 * 2.0 * 2.0 * tokens * static_cast<double>(cfg.hidden) * static_cast<double>(cfg.ffn);
  if (cfg.cuda_graph) {
    say("CUDA graph: from step 2 on, each step replays one capture of the teacher's targets, the "
        "forward pass, the loss and dL/dy, the backward pass, the dp gradient sum and the "
        "optimizer; the inputs, Adam's bias corrections and the loss read stay outside it (step "
        "1 ran eagerly)" +
        std::string(cfg.timed_passes > 0 ? "; the timed passes replay a captured pass (its "
                                           "loss left on the device)"
                                         : ""));
  }
  if (cfg.timed_passes > 0) {
    say(fmt("forward + backward pass: %.4f ms (median of %.0f after 3 untimed, slowest rank), ",
            r.pass_median_ms, cfg.timed_passes) +
        fmt("%.0f tokens/s, %.3g TFLOP/s (12 T H F flops)", tokens / (r.pass_median_ms * 1e-3),
            pass_flops / (r.pass_median_ms * 1e-3) * 1e-12));
  }
  say("share of the step time (summed over the steps, slowest rank per phase):");
  nlohmann::json phases = nlohmann::json::array();
  double phase_total = 0.0;
  for (double t : r.phase_ms) phase_total += t;
  for (int p = 0; p < kPhases; ++p) {
    if (static_cast<Phase>(p) == Phase::kGraphStep && !cfg.cuda_graph) continue;
    const double share = phase_total > 0 ? r.phase_ms[p] / phase_total : 0.0;
    say(fmt("  %6.1f%%  %10.3f ms  ", 100.0 * share, r.phase_ms[p]) +
        phase_name(static_cast<Phase>(p)));
    phases.push_back(
        {{"phase", phase_name(static_cast<Phase>(p))}, {"ms", r.phase_ms[p]}, {"share", share}});
  }

  say("one traced forward and backward pass, per layer call (ms, slowest rank per figure; the "
      "GEMMs' and the communication's busy times overlap where hidden > 0):");
  say("  call                  wall      GEMMs   communication   hidden under GEMMs");
  nlohmann::json split_json = nlohmann::json::array();
  for (const CallSplit& c : r.splits) {
    char line[256];
    std::snprintf(line, sizeof(line), "  %-19s %8.3f  %9.3f  %14.3f  %10.3f (%.0f%%)",
                  c.call.c_str(), c.wall_ms, c.gemm_ms, c.comm_ms, c.hidden_ms,
                  c.comm_ms > 0 ? 100.0 * c.hidden_ms / c.comm_ms : 0.0);
    say(line);
    if (cfg.fsdp > 1) {
      std::snprintf(line, sizeof(line), "    of which over fsdp %34.3f  %10.3f (%.0f%%)", c.fsdp_ms,
                    c.fsdp_hidden_ms, c.fsdp_ms > 0 ? 100.0 * c.fsdp_hidden_ms / c.fsdp_ms : 0.0);
      say(line);
    }
    split_json.push_back({{"call", c.call},
                          {"wall_ms", c.wall_ms},
                          {"gemm_ms", c.gemm_ms},
                          {"communication_ms", c.comm_ms},
                          {"hidden_ms", c.hidden_ms},
                          {"fsdp_communication_ms", c.fsdp_ms},
                          {"fsdp_hidden_ms", c.fsdp_hidden_ms}});
  }

  if (!cfg.trace.empty()) {
    const int lane = std::min(cfg.overlap.num_max_streams, r.ctx->backend().num_streams());
    const std::string terr =
        write_trace(cfg.trace, r.trace, lane,
                    "cgemm-train: one forward and backward pass of the MLP block, " +
                        std::to_string(r.world) + " ranks, " + mesh_words(cfg),
                    MPI_COMM_WORLD);
    if (terr.empty()) {
      say("trace written to " + cfg.trace + " (Chrome trace JSON) and " + cfg.trace + ".svg");
    }
    if (any_rank_failed(terr)) return kExitUsage;
  }
  if (!cfg.report.empty()) {
    nlohmann::json report = report_head(r);
    report["diverged"] = nullptr;
    report["loss_ratio_last_to_first"] = ratio;
    report["step_ms"] = r.step_ms;
    report["tokens_per_step"] = tokens;
    report["tokens_per_second"] = tokens_per_s;
    report["phases"] = phases;
    report["call_split"] = split_json;
    const StateBytes b = r.trainer->state_bytes();
    report["memory"] = {
        {"weights_and_state_bytes", b.weights},
        {"weights_and_state_bytes_replicated", b.weights_replicated},
        {"biases_and_state_bytes", b.biases},
        {"fsdp_gathered_bytes", b.gathered},
        {"note",
         "this rank's W1 and W2 with their gradients (dtype), fp32 masters and Adam moments (and "
         "dp sums); replicated: the same with every weight whole (fsdp 1); the biases stay "
         "replicated over fsdp; fsdp_gathered_bytes: the context's fsdp ring and reorder buffer "
         "(the forward's in-GEMM gathers, the dgrads' gathers and the wgrads' reduce-scatters "
         "use them, one at a time) and the wgrads' send slots; not counted: the backend's "
         "staging of the fsdp group's collectives"}};
    if (cfg.cuda_graph) {
      report["cuda_graph"] = {
          {"captured",
           {"teacher targets", "forward", "loss and dL/dy (on the device)", "backward",
            "dp gradient sum", "optimizer"}},
          {"outside", {"inputs", "Adam bias corrections (copied in)", "loss read and sum"}},
          {"eager_steps", 1},
          {"timed_pass", cfg.timed_passes > 0 ? "captured forward and backward" : "none"}};
    }
    if (cfg.timed_passes > 0) {
      report["timed_pass"] = {{"median_ms", r.pass_median_ms},
                              {"ms", r.pass_ms},
                              {"tokens_per_second", tokens / (r.pass_median_ms * 1e-3)},
                              {"tflops", pass_flops / (r.pass_median_ms * 1e-3) * 1e-12},
                              {"note",
                               "forward, loss and backward of the student on the last step's "
                               "inputs, no update; median over the passes of each rank, then "
                               "the largest over the ranks; ms is rank 0's"}};
    }
    report["timing_note"] =
        "ms summed over the steps on the slowest rank of each phase; the layer calls include "
        "their collectives (overlapped or not, by path); step_ms and tokens_per_second count "
        "every phase, the inputs and the teacher's forward pass included";
    if (!write_report(cfg, report)) return kExitUsage;
  }
  return 0;
}

// The options and their outputs' writability, every rank alike. False: refused.
bool parse(int argc, char** argv, int world, TrainParseResult& parsed) {
  if (!all_ranks_ok([&] {
        parsed = parse_train_config(argc, argv);
        if (!parsed.help) resolve_train_mesh(parsed.config, world);
      })) {
    return false;
  }
  if (parsed.help) return true;
  return all_ranks_ok([&] {
    if (world_rank() != 0) return;
    for (const NamedPath& out : train_outputs(parsed.config)) {
      if (!out.path.empty()) check_writable(out);
    }
  });
}

int run(int argc, char** argv) {
  const int world = world_size();
  TrainParseResult parsed;
  if (!parse(argc, argv, world, parsed)) return kExitUsage;
  if (parsed.help) {
    say(parsed.help_text);
    return 0;
  }
  TrainRun r(parsed.config, world);
  const TrainConfig& cfg = r.cfg;
  watchdog::start(cfg.timeout, world_rank(), "cgemm-train",
                  [] { abort_world(watchdog::kExitTimeout); });
  if (!context_for(cfg, cfg.tp, cfg.overlap, r.ctx)) return kExitUsage;
  say("cgemm-train: " + std::to_string(world) + " ranks, mesh dp=" + std::to_string(cfg.dp) +
      (cfg.fsdp > 1 ? " x fsdp=" + std::to_string(cfg.fsdp) : std::string()) +
      " x tp=" + std::to_string(cfg.tp) + ", backend " + r.ctx->backend().name() + ", transport " +
      r.ctx->backend().transport());
  say("resolved config:\n" + train_ini(cfg));
  if (!memory_fits(r) || !plan(r)) return kExitUsage;
  train(r);
  if (r.diverged_step > 0) return end_diverged(r);
  measure(r);
  const int status = summarize(r);
  r.trainer.reset();
  return status;
}

}  // namespace
}  // namespace cgemm::launcher

int main(int argc, char** argv) {
  return cgemm::launcher::run_tool(argc, argv, "cgemm-train", cgemm::launcher::run, true);
}
