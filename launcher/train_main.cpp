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
#include "dry_run.hpp"
#include "job.hpp"
#include "mpi_session.hpp"
#include "output_files.hpp"
#include "report_json.hpp"
#include "trace_split.hpp"
#include "trace_writer.hpp"
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
          {"config",
           cfg.config_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(cfg.config_file)}};
}

int run(int argc, char** argv) {
  const int world = world_size();
  TrainParseResult parsed;
  if (!all_ranks_ok([&] {
        parsed = parse_train_config(argc, argv);
        if (!parsed.help) resolve_train_mesh(parsed.config, world);
      })) {
    return kExitUsage;
  }
  if (parsed.help) {
    say(parsed.help_text);
    return 0;
  }
  const TrainConfig& cfg = parsed.config;
  if (!all_ranks_ok([&] {
        if (world_rank() != 0) return;
        for (const NamedPath& out : train_outputs(cfg)) {
          if (!out.path.empty()) check_writable(out);
        }
      })) {
    return kExitUsage;
  }
  watchdog::start(cfg.timeout, world_rank(), "cgemm-train",
                  [] { abort_world(watchdog::kExitTimeout); });

  std::unique_ptr<Context> ctx;
  if (!context_for(cfg, cfg.tp, cfg.overlap, ctx)) return kExitUsage;
  say("cgemm-train: " + std::to_string(world) + " ranks, mesh dp=" + std::to_string(cfg.dp) +
      " x tp=" + std::to_string(cfg.tp) + ", backend " + ctx->backend().name() + ", transport " +
      ctx->backend().transport());
  say("resolved config:\n" + train_ini(cfg));

  // memory: before any buffer, the ranks sharing a host (CPU) or a GPU (CUDA), as cgemm-run's
  // check (a block too large for a cgroup was OOM-killed without a word). A shape the planner
  // refuses is left to the plan phase below, which names the block.
  {
    std::string error;
    int64_t mine = -1;
    try {
      mine = MlpTrainer::bytes_needed(*ctx, cfg);
    } catch (const Error&) {
      // Planned alike on every rank: they all skip the check.
    }
    if (mine >= 0) {
      const MemoryCheck c = check_shared_memory(*ctx, mine);
      if (!c.ok) {
        error = c.message + " (the MLP block: batch " + std::to_string(cfg.batch) + ", seq_len " +
                std::to_string(cfg.seq_len) + ", hidden " + std::to_string(cfg.hidden) + ", ffn " +
                std::to_string(cfg.ffn) + ", " + std::string(dtype_name(cfg.dtype)) + " on dp " +
                std::to_string(cfg.dp) + " x tp " + std::to_string(cfg.tp) + "; each rank needs " +
                std::to_string(mine) +
                " bytes for its activations, weights, optimizer state and GEMM plans; nothing "
                "was allocated)";
      }
    }
    if (any_rank_failed(error)) return kExitUsage;
  }

  // plan: the planner's refusals are the same on every rank.
  std::unique_ptr<MlpTrainer> trainer;
  if (!all_ranks_ok([&] {
        try {
          trainer = std::make_unique<MlpTrainer>(*ctx, cfg);
        } catch (const PlanError& e) {
          // The planner's message names its rule, not the block: say which shape it refused.
          throw Error("the planner refuses the MLP block (batch " + std::to_string(cfg.batch) +
                      ", seq_len " + std::to_string(cfg.seq_len) + ", hidden " +
                      std::to_string(cfg.hidden) + ", ffn " + std::to_string(cfg.ffn) + " on dp " +
                      std::to_string(cfg.dp) + " x tp " + std::to_string(cfg.tp) +
                      "): " + e.what());
        }
      })) {
    return kExitUsage;
  }
  say("up_proj:   " + trainer->up().forward_plan().schedule_summary());
  say("down_proj: " + trainer->down().forward_plan().schedule_summary());
  if (trainer->dp_buckets() != nullptr) {
    std::string buckets = trainer->dp_buckets()->describe();
    while (!buckets.empty() && buckets.back() == '\n') buckets.pop_back();
    say("dp gradient buckets (" + std::to_string(cfg.bucket_kib) + " KiB):\n" + buckets);
  }

  // train
  std::vector<double> losses, step_ms;
  double phase_ms[kPhases] = {};
  std::vector<TraceSpan> trace;
  std::vector<double> pass_ms;
  double pass_median_ms = 0.0;
  std::vector<CallSplit> splits;
  int diverged_step = 0;  // the first step whose loss is not finite; 0: none
  try {
    for (int s = 0; s < cfg.steps; ++s) {
      const StepResult r = trainer->step(s);
      double total = 0.0;
      for (int p = 0; p < kPhases; ++p) {
        phase_ms[p] += r.phase_ms[p];
        total += r.phase_ms[p];
      }
      losses.push_back(r.loss);
      step_ms.push_back(total);
      say(fmt("step %4.0f  loss %.9g", s + 1, r.loss));
      // The loss is summed over the job (an all-reduce): every rank stops at the same step.
      // Steps after a NaN or an infinity only carry it on; the run has failed.
      if (!std::isfinite(r.loss)) {
        diverged_step = s + 1;
        break;
      }
    }
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
  if (diverged_step > 0) {
    const double loss = losses.back();
    const std::string lr = nlohmann::json(cfg.lr).dump();
    any_rank_failed("training diverged: the loss of step " + std::to_string(diverged_step) +
                    " is " + loss_json(loss).get<std::string>() + " (lr " + lr + ", optimizer " +
                    std::string(optimizer_name(cfg.optimizer)) +
                    "); the run stopped there (exit status 5)");
    if (!cfg.report.empty()) {
      nlohmann::json report = provenance_json();
      report["program"] = "cgemm-train";
      report["config"] = config_json(cfg);
      report["world_size"] = world;
      report["backend"] = ctx->backend().name();
      report["transport"] = ctx->backend().transport();
      report["losses"] = losses_json(losses);
      report["diverged"] = {{"step", diverged_step}, {"loss", loss_json(loss)}};
      report["step_ms"] = step_ms;
      if (!all_ranks_ok([&] {
            if (world_rank() != 0) return;
            write_replacing("--report", cfg.report, report.dump(2) + "\n");
            say("report written to " + cfg.report);
          })) {
        return kExitUsage;
      }
    }
    trainer.reset();
    return kExitDiverged;
  }
  try {
    // Always one traced pass: the split of each layer call into GEMM and communication time
    // (the trace file only with --trace).
    trace = trainer->trace_pass();
    for (const CallSplit& c : split_calls(trace)) {
      double v[4] = {c.wall_ms, c.gemm_ms, c.comm_ms, c.hidden_ms};
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                "MPI_Allreduce(call split)");
      splits.push_back({c.call, v[0], v[1], v[2], v[3]});
    }
    if (cfg.timed_passes > 0) {
      for (int i = 0; i < kUntimedPasses; ++i) trainer->timed_pass();
      for (int i = 0; i < cfg.timed_passes; ++i) pass_ms.push_back(trainer->timed_pass());
      pass_median_ms = slowest_median(pass_ms);
    }
    // The slowest rank's times.
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, phase_ms, kPhases, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce(phase times)");
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, step_ms.data(), static_cast<int>(step_ms.size()),
                            MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce(step times)");
  } catch (const std::exception& e) {
    abort_job(e.what());
  }

  // summary
  double total_ms = 0.0;
  for (double t : step_ms) total_ms += t;
  const double tokens = static_cast<double>(cfg.batch) * static_cast<double>(cfg.seq_len);
  const double tokens_per_s = total_ms > 0 ? tokens * cfg.steps / (total_ms * 1e-3) : 0.0;
  const double ratio = losses.front() > 0 ? losses.back() / losses.front() : 0.0;
  say(fmt("loss %.6g -> %.6g after %.0f steps", losses.front(), losses.back(), cfg.steps) +
      fmt(" (%.1f%% of the first)", 100.0 * ratio));
  // The step time includes drawing the inputs and the teacher's forward pass (the targets).
  say(fmt("%.0f tokens per step, %.3f ms per step (mean of the slowest rank's), %.0f tokens/s",
          tokens, total_ms / cfg.steps, tokens_per_s) +
      " (a step counts every phase below, the inputs and the teacher's targets included)");
  // A forward and backward pass: 3 GEMMs per projection (forward, dgrad, wgrad), each 2 T H F
  // flops over the job's T tokens.
  const double pass_flops =
      3.0 * 2.0 * 2.0 * tokens * static_cast<double>(cfg.hidden) * static_cast<double>(cfg.ffn);
  if (cfg.timed_passes > 0) {
    say(fmt("forward + backward pass: %.4f ms (median of %.0f after 3 untimed, slowest rank), ",
            pass_median_ms, cfg.timed_passes) +
        fmt("%.0f tokens/s, %.3g TFLOP/s (12 T H F flops)", tokens / (pass_median_ms * 1e-3),
            pass_flops / (pass_median_ms * 1e-3) * 1e-12));
  }
  say("share of the step time (summed over the steps, slowest rank per phase):");
  nlohmann::json phases = nlohmann::json::array();
  double phase_total = 0.0;
  for (double t : phase_ms) phase_total += t;
  for (int p = 0; p < kPhases; ++p) {
    const double share = phase_total > 0 ? phase_ms[p] / phase_total : 0.0;
    say(fmt("  %6.1f%%  %10.3f ms  ", 100.0 * share, phase_ms[p]) +
        phase_name(static_cast<Phase>(p)));
    phases.push_back(
        {{"phase", phase_name(static_cast<Phase>(p))}, {"ms", phase_ms[p]}, {"share", share}});
  }

  say("one traced forward and backward pass, per layer call (ms, slowest rank per figure; the "
      "GEMMs' and the communication's busy times overlap where hidden > 0):");
  say("  call                  wall      GEMMs   communication   hidden under GEMMs");
  nlohmann::json split_json = nlohmann::json::array();
  for (const CallSplit& c : splits) {
    char line[256];
    std::snprintf(line, sizeof(line), "  %-19s %8.3f  %9.3f  %14.3f  %10.3f (%.0f%%)",
                  c.call.c_str(), c.wall_ms, c.gemm_ms, c.comm_ms, c.hidden_ms,
                  c.comm_ms > 0 ? 100.0 * c.hidden_ms / c.comm_ms : 0.0);
    say(line);
    split_json.push_back({{"call", c.call},
                          {"wall_ms", c.wall_ms},
                          {"gemm_ms", c.gemm_ms},
                          {"communication_ms", c.comm_ms},
                          {"hidden_ms", c.hidden_ms}});
  }

  if (!cfg.trace.empty()) {
    const int lane = std::min(cfg.overlap.num_max_streams, ctx->backend().num_streams());
    const std::string terr = write_trace(
        cfg.trace, trace, lane,
        "cgemm-train: one forward and backward pass of the MLP block, " + std::to_string(world) +
            " ranks, dp " + std::to_string(cfg.dp) + " x tp " + std::to_string(cfg.tp),
        MPI_COMM_WORLD);
    if (terr.empty()) {
      say("trace written to " + cfg.trace + " (Chrome trace JSON) and " + cfg.trace + ".svg");
    }
    if (any_rank_failed(terr)) return kExitUsage;
  }
  if (!cfg.report.empty()) {
    nlohmann::json report = provenance_json();
    report["program"] = "cgemm-train";
    report["config"] = config_json(cfg);
    report["world_size"] = world;
    report["backend"] = ctx->backend().name();
    report["transport"] = ctx->backend().transport();
    report["losses"] = losses_json(losses);
    report["diverged"] = nullptr;
    report["loss_ratio_last_to_first"] = ratio;
    report["step_ms"] = step_ms;
    report["tokens_per_step"] = tokens;
    report["tokens_per_second"] = tokens_per_s;
    report["phases"] = phases;
    report["call_split"] = split_json;
    if (cfg.timed_passes > 0) {
      report["timed_pass"] = {{"median_ms", pass_median_ms},
                              {"ms", pass_ms},
                              {"tokens_per_second", tokens / (pass_median_ms * 1e-3)},
                              {"tflops", pass_flops / (pass_median_ms * 1e-3) * 1e-12},
                              {"note",
                               "forward, loss and backward of the student on the last step's "
                               "inputs, no update; median over the passes of each rank, then "
                               "the largest over the ranks; ms is rank 0's"}};
    }
    report["timing_note"] =
        "ms summed over the steps on the slowest rank of each phase; the layer calls include "
        "their collectives (overlapped or not, by path); step_ms and tokens_per_second count "
        "every phase, the inputs and the teacher's forward pass included";
    if (!all_ranks_ok([&] {
          if (world_rank() != 0) return;
          write_replacing("--report", cfg.report, report.dump(2) + "\n");
          say("report written to " + cfg.report);
        })) {
      return kExitUsage;
    }
  }
  trainer.reset();
  return 0;
}

}  // namespace
}  // namespace cgemm::launcher

int main(int argc, char** argv) {
  return cgemm::launcher::run_tool(argc, argv, "cgemm-train", cgemm::launcher::run, true);
}
