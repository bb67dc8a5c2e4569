// cgemm-run: the main job. Every rank parses the same options, builds the dp x tp mesh
// and a backend, then for each GEMM of the block runs the overlapped collective GEMM and
// the sequential path, times both and checks one against the other.
//
// Errors every rank sees alike (options, mesh, planner rules) end the job on every rank
// with one message from the lowest failing rank. Errors of one rank (a device or transport
// fault) print the rank and the message, then abort the job so no rank waits forever.

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"
#include "check.hpp"
#include "dry_run.hpp"
#include "job.hpp"
#include "output_dump.hpp"
#include "run_config.hpp"
#include "trace_writer.hpp"

namespace cgemm::launcher {
namespace {

nlohmann::json shape_json(const Shape& s) { return nlohmann::json(s); }

/// One GEMM of the block with its buffers, kept for the whole run: the check rounds come back
/// to the same buffers after the other GEMMs used theirs (plans alternate, buffers are reused).
struct GemmJob {
  GemmPlan& plan;
  const RunConfig& cfg;
  size_t index;
  std::string tag;
  int64_t out_n, bias_n;
  Buffer lhs, rhs, bias, out, ref;
  nlohmann::json report;
  CheckStats checked;  // this rank's, summed over the check rounds

  static size_t bytes(int64_t n, DType t) { return static_cast<size_t>(n) * dtype_size(t); }
  GemmJob(Backend& be, GemmPlan& p, const RunConfig& c, size_t i)
      : plan(p),
        cfg(c),
        index(i),
        tag("[" + std::to_string(i + 1) + "/" + std::to_string(c.gemms.size()) + " " +
            p.desc().name + "] "),
        out_n(num_elements(p.out_local())),
        bias_n(p.desc().bias_shape ? num_elements(p.bias_local()) : 0),
        lhs(be, bytes(num_elements(p.lhs_local()), p.desc().dtype)),
        rhs(be, bytes(num_elements(p.rhs_local()), p.desc().dtype)),
        bias(be, bytes(std::max<int64_t>(bias_n, 1), p.desc().out_dtype)),
        out(be, bytes(out_n, p.desc().out_dtype)),
        ref(be, bytes(out_n, p.desc().out_dtype)) {}

  uint64_t seed() const { return cfg.seed + 1000 * index; }
  const void* bias_p() const { return bias_n > 0 ? bias.p : nullptr; }
  // Each rank fills its own shards of the global tensors drawn from `seed`.
  void fill_inputs(uint64_t s) {
    Backend& be = lhs.be;
    const GemmDesc& d = plan.desc();
    be.fill_normal(lhs.p, d.dtype, d.lhs_shape, plan.lhs_local(), plan.lhs_offset(), s + 1,
                   cfg.std);
    be.fill_normal(rhs.p, d.dtype, d.rhs_shape, plan.rhs_local(), plan.rhs_offset(), s + 2,
                   cfg.std);
    if (bias_n > 0) {
      be.fill_normal(bias.p, d.out_dtype, *d.bias_shape, plan.bias_local(), plan.bias_offset(),
                     s + 3, cfg.std);
    }
  }
  void overlapped() { plan.execute_overlapped(lhs.p, rhs.p, bias_p(), out.p); }
  void sequential() { plan.execute_sequential(lhs.p, rhs.p, bias_p(), ref.p); }
};

/// Plans, warms up and times one GEMM; fills its report entry.
void time_gemm(GemmJob& job, Backend& be) {
  GemmPlan& plan = job.plan;
  const GemmDesc& d = plan.desc();
  const RunConfig& cfg = job.cfg;
  const std::string& tag = job.tag;
  job.fill_inputs(job.seed());
  say(tag + "lhs " + shape_str(d.lhs_shape) + " -> local " + shape_str(plan.lhs_local()) +
      ", rhs " + shape_str(d.rhs_shape) + " -> " + shape_str(plan.rhs_local()) + ", out " +
      shape_str(plan.out_global()) + " -> " + shape_str(plan.out_local()));
  say(tag + "schedule: " + plan.schedule_summary());
  say(tag + "warm-up " + std::to_string(cfg.warmup) + ", then " + std::to_string(cfg.iterations) +
      (cfg.iterations == 1 ? " timed iteration" : " timed iterations") + " of each path");
  // execute() makes the overlap policy's choice on its first call (auto: times both paths).
  plan.execute(job.lhs.p, job.rhs.p, job.bias_p(), job.out.p);
  for (int i = 0; i < cfg.warmup; ++i) {
    job.overlapped();
    job.sequential();
  }
  be.synchronize();
  say(tag + "execute() path: " + plan.path_summary());
  const auto t_over = time_iterations(be, cfg.iterations, [&] { job.overlapped(); });
  const auto t_ref = time_iterations(be, cfg.iterations, [&] { job.sequential(); });
  const double med_over = median(t_over), med_ref = median(t_ref);
  const double tflops = plan.local_flops() / (med_over * 1e-3) / 1e12;

  nlohmann::json& j = job.report;
  j["name"] = d.name;
  j["collective"] = collective_name(d.collective);
  j["lhs_shape"] = shape_json(d.lhs_shape);
  j["rhs_shape"] = shape_json(d.rhs_shape);
  j["out_shape"] = shape_json(plan.out_global());
  j["lhs_local"] = shape_json(plan.lhs_local());
  j["rhs_local"] = shape_json(plan.rhs_local());
  j["out_local"] = shape_json(plan.out_local());
  j["lhs_spec"] = spec_str(plan.sharding().lhs);
  j["rhs_spec"] = spec_str(plan.sharding().rhs);
  j["out_spec"] = spec_str(plan.sharding().out);
  j["schedule"] = plan.schedule_summary();
  j["transport"] = be.transport();
  j["path"] = plan.path_summary();
  j["uses_overlap"] = plan.uses_overlap();
  j["overlapped_ms"] = med_over;
  j["sequential_ms"] = med_ref;
  j["overlapped_samples_ms"] = t_over;
  j["sequential_samples_ms"] = t_ref;
  j["speedup"] = med_over > 0 ? med_ref / med_over : 0.0;
  j["tflops_per_rank"] = tflops;
  char line[256];
  std::snprintf(line, sizeof(line),
                "overlapped %.3f ms | sequential %.3f ms | speed-up %.2fx | %.2f TFLOP/s per rank",
                med_over, med_ref, med_over > 0 ? med_ref / med_over : 0.0, tflops);
  say(tag + line);
}

/// One checked call of both paths on fresh inputs (round r), folded into job.checked.
void check_round(GemmJob& job, Backend& be, int round) {
  const GemmDesc& d = job.plan.desc();
  // Fresh inputs, so a chunk read before it arrived (still holding an earlier call's data
  // in the plan's buffers) shows; outputs poisoned so an element nobody wrote fails.
  job.fill_inputs(job.seed() + 10 + static_cast<uint64_t>(round));
  be.fill_nan(job.out.p, d.out_dtype, job.out_n);
  be.fill_nan(job.ref.p, d.out_dtype, job.out_n);
  job.overlapped();
  job.sequential();
  be.synchronize();
  const size_t bytes = static_cast<size_t>(job.out_n) * dtype_size(d.out_dtype);
  std::vector<char> h_out(bytes), h_ref(bytes);
  be.copy_to_host(h_out.data(), job.out.p, bytes);
  be.copy_to_host(h_ref.data(), job.ref.p, bytes);
  job.checked.merge(
      compare(h_out.data(), h_ref.data(), d.out_dtype, job.out_n, tolerance_for(d.out_dtype)));
}

/// The check's verdict over all ranks and rounds: prints it and fills the report entry.
bool report_check(GemmJob& job) {
  const DType out_dtype = job.plan.desc().out_dtype;
  const CheckStats& s = job.checked;
  int64_t counts[2] = {s.compared, s.failures};
  double errs[2] = {s.max_abs, s.max_rel};
  MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, errs, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const bool pass = counts[1] == 0 && counts[0] > 0;
  const Tolerance tol = tolerance_for(out_dtype);
  job.report["check"] = {
      {"compared", counts[0]},          {"failures", counts[1]}, {"max_abs_error", errs[0]},
      {"max_rel_error", errs[1]},       {"rtol", tol.rtol},      {"atol", tol.atol},
      {"rounds", job.cfg.check_rounds}, {"passed", pass}};
  char line[320];
  std::snprintf(line, sizeof(line),
                "check %s: %lld elements compared, %lld failures, max abs err %.3g, max rel err "
                "%.3g (rtol %g, atol %g)%s",
                pass ? "PASSED" : "FAILED", static_cast<long long>(counts[0]),
                static_cast<long long>(counts[1]), errs[0], errs[1], tol.rtol, tol.atol,
                job.cfg.check_rounds > 1
                    ? (" over " + std::to_string(job.cfg.check_rounds) + " rounds").c_str()
                    : "");
  say(job.tag + line);
  return pass;
}

/// One more overlapped call, traced; ranks start together so their timelines line up.
std::vector<TraceSpan> trace_gemm(GemmJob& job, Backend& be) {
  be.synchronize();
  MPI_Barrier(MPI_COMM_WORLD);
  be.set_tracing(true);
  job.overlapped();
  std::vector<TraceSpan> spans = be.take_trace();
  be.set_tracing(false);
  return spans;
}

std::string groups_str(const std::vector<std::vector<int>>& groups) {
  std::ostringstream s;
  for (size_t i = 0; i < groups.size(); ++i) {
    s << (i ? " " : "") << "[";
    for (size_t k = 0; k < groups[i].size(); ++k) s << (k ? "," : "") << groups[i][k];
    s << "]";
  }
  return s.str();
}

int run(int argc, char** argv) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);

  RunConfig cfg;
  std::string error;
  try {
    ParseResult parsed = parse_run_config(argc, argv);
    if (parsed.help) {
      say(parsed.help_text);
      return 0;
    }
    cfg = std::move(parsed.config);
    resolve_mesh(cfg, planned_world(cfg, world));
    check_values(cfg);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (any_rank_failed(error)) return kExitUsage;

  // Every GEMM planned without a backend, before anything is created: sizes that overflow
  // and plans that cannot run end the job here, alike on every rank (dry_run.hpp).
  try {
    plan_block(cfg, world_rank());
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (any_rank_failed(error)) return kExitUsage;
  if (cfg.dry_run) return dry_run(cfg, world);

  // Output files are checked before the run, not after it: a long run must not be lost.
  if (world_rank() == 0) {
    for (const auto& [option, path] : {std::pair<const char*, std::string>{"--report", cfg.report},
                                       {"--trace", cfg.trace},
                                       {"--output_dump", cfg.output_dump}}) {
      if (path.empty()) continue;
      std::ofstream probe(path, std::ios::app);
      if (!probe) error = std::string(option) + " " + path + ": cannot open the file for writing";
    }
  }
  if (any_rank_failed(error)) return kExitUsage;

  // The backend rule (Context): decided alike on every rank, so a refusal is one message.
  std::unique_ptr<Context> ctx;
  try {
    ctx = std::make_unique<Context>(MPI_COMM_WORLD, MeshConfig{cfg.dp, cfg.tp, "dp", "tpsp"},
                                    BackendOptions{cfg.backend, cfg.gpu_sharing}, cfg.overlap);
  } catch (const BackendRuleError& e) {
    error = e.what();
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
  if (any_rank_failed(error)) return kExitUsage;
  // The memory check, before any buffer: the ranks sharing a host (CPU) or a GPU (CUDA).
  if (any_rank_failed(memory_refusal(cfg, *ctx))) return kExitUsage;
  if (!ctx->backend_notice().empty()) say(ctx->backend_notice());
  const MeshComms& comms = ctx->comms();
  say("cgemm-run: " + std::to_string(world) + " ranks, mesh dp=" + std::to_string(comms.dp()) +
      " x tp=" + std::to_string(comms.tp()) + ", backend " + ctx->backend().name() +
      ", transport " + ctx->backend().transport());
  say("tensor-parallel groups (world ranks): " + groups_str(comms.tp_groups()));
  say("data-parallel groups (world ranks):   " + groups_str(comms.dp_groups()));
  // Where the ranks run: the CUDA backend moves data with copy engines only inside a host.
  std::vector<char> hosts(static_cast<size_t>(world) * MPI_MAX_PROCESSOR_NAME);
  {
    std::string mine = comms.host_name();
    mine.resize(MPI_MAX_PROCESSOR_NAME, '\0');
    MPI_Gather(mine.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME,
               MPI_CHAR, 0, MPI_COMM_WORLD);
  }
  int tp_local = comms.tp_group_on_one_node() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &tp_local, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  std::vector<std::string> host_of_rank;
  for (int r = 0; r < world; ++r) {
    host_of_rank.emplace_back(hosts.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME);
  }
  {
    std::string line = "hosts of the ranks:";
    for (int r = 0; r < world; ++r) line += " " + std::to_string(r) + "=" + host_of_rank[r];
    say(line);
  }
  say(std::string("tensor-parallel groups on one host: ") + (tp_local ? "yes" : "no"));
  say(ctx->backend().describe());
  say("resolved config:\n" + to_ini(cfg));

  // Plan every GEMM first: planner errors are the same on every rank.
  std::vector<std::unique_ptr<GemmPlan>> plans;
  try {
    for (const GemmSpec& g : cfg.gemms) {
      plans.push_back(std::make_unique<GemmPlan>(
          *ctx, tensor_sequence_parallel_gemm(*ctx, g.name, g.collective, cfg.batch, cfg.seq_len,
                                              g.hidden_in, g.hidden_out, cfg.dtype, cfg.bias,
                                              cfg.transpose_batch_sequence)));
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (any_rank_failed(error)) return kExitUsage;

  nlohmann::json report;
  report["config"] = to_ini(cfg);
  report["world_size"] = world;
  report["mesh"] = {{"dp", comms.dp()},
                    {"tp", comms.tp()},
                    {"tp_groups", comms.tp_groups()},
                    {"dp_groups", comms.dp_groups()},
                    {"hosts", host_of_rank},
                    {"tp_groups_on_one_host", tp_local == 1}};
  report["backend"] = ctx->backend().name();
  report["transport"] = ctx->backend().transport();
  report["backend_details"] = ctx->backend().describe();
  report["ranks_per_gpu"] = ctx->ranks_per_gpu();
  report["timing_note"] =
      ctx->ranks_per_gpu() > 1
          ? nlohmann::json("GPU shared by " + std::to_string(ctx->ranks_per_gpu()) +
                           " ranks: times are not a speed measurement")
          : nlohmann::json(nullptr);
  bool all_passed = true;
  std::vector<TraceSpan> trace;
  std::vector<DumpRecord> dump;
  try {
    Backend& be = ctx->backend();
    std::vector<std::unique_ptr<GemmJob>> jobs;
    for (size_t i = 0; i < plans.size(); ++i) {
      jobs.push_back(std::make_unique<GemmJob>(be, *plans[i], cfg, i));
      time_gemm(*jobs.back(), be);
    }
    if (cfg.check) {
      for (int round = 0; round < cfg.check_rounds; ++round) {
        for (auto& job : jobs) check_round(*job, be, round);
      }
      for (auto& job : jobs) all_passed = report_check(*job) && all_passed;
      // The outputs of the last round, which every backend computes from the same inputs.
      if (!cfg.output_dump.empty()) {
        for (auto& job : jobs) {
          dump.push_back(gather_output(be, job->plan, job->out.p, MPI_COMM_WORLD));
        }
      }
    }
    for (auto& job : jobs) {
      report["gemms"].push_back(job->report);
      if (cfg.trace.empty()) continue;
      // GEMMs of the block follow one another on the timeline.
      std::vector<TraceSpan> spans = trace_gemm(*job, be);
      const double shift = trace.empty() ? 0.0 : trace.back().end_ms + 0.05;
      for (TraceSpan& s : spans) {
        s.start_ms += shift;
        s.end_ms += shift;
        trace.push_back(std::move(s));
      }
    }
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
  if (!cfg.output_dump.empty() && cfg.check) {
    std::string derr;
    if (world_rank() == 0) {
      try {
        write_dump(cfg.output_dump, dump);
        say("outputs written to " + cfg.output_dump + " (compare two with cgemm-compare)");
      } catch (const std::exception& e) {
        derr = e.what();
      }
    }
    if (any_rank_failed(derr)) return kExitUsage;
  }
  if (!cfg.trace.empty()) {
    std::string terr;
    const auto traces = gather_traces(trace, MPI_COMM_WORLD);
    if (world_rank() == 0) {
      try {
        const int lane = std::min(cfg.overlap.num_max_streams, ctx->backend().num_streams());
        write_chrome_trace(cfg.trace, traces, lane);
        write_svg_timeline(cfg.trace + ".svg", traces, lane,
                           "cgemm overlapped collective GEMMs: " + std::to_string(world) +
                               " ranks, dp " + std::to_string(comms.dp()) + " x tp " +
                               std::to_string(comms.tp()) + ", " + ctx->backend().name() +
                               " backend, transport " + ctx->backend().transport());
        say("trace written to " + cfg.trace + " (Chrome trace JSON) and " + cfg.trace + ".svg");
      } catch (const std::exception& e) {
        terr = e.what();
      }
    }
    if (any_rank_failed(terr)) return kExitUsage;
  }
  report["checked"] = cfg.check;
  report["passed"] = cfg.check ? nlohmann::json(all_passed) : nlohmann::json(nullptr);
  plans.clear();
  say(std::string("cgemm-run: ") +
      (cfg.check ? (all_passed ? "all checks PASSED" : "a check FAILED") : "checks skipped"));
  if (ctx->ranks_per_gpu() > 1) {
    say("cgemm-run: GPU shared by " + std::to_string(ctx->ranks_per_gpu()) +
        " ranks: times are not a speed measurement");
  }

  if (!cfg.report.empty()) {
    std::string werr;
    if (world_rank() == 0) {
      std::ofstream f(cfg.report);
      f << report.dump(2) << "\n";
      f.close();
      if (!f)
        werr = "cannot write the report to '" + cfg.report + "'";
      else
        say("report written to " + cfg.report);
    }
    if (any_rank_failed(werr)) return kExitUsage;
  }
  return all_passed ? 0 : kExitCheckFailed;
}

}  // namespace
}  // namespace cgemm::launcher

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  cgemm::launcher::set_program_name("cgemm-run");
  const int rc = cgemm::launcher::run(argc, argv);
  MPI_Finalize();
  return rc;
}
