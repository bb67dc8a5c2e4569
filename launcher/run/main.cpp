// cgemm-run: the main job. Every rank parses the same options, builds the dp x tp mesh
// and a backend, then for each GEMM of the block runs the overlapped collective GEMM and
// the sequential path, times both and checks one against the other; or, with experiment =
// moe, runs the MoE expert block of grouped GEMMs (moe_block.hpp).
//
// Errors every rank sees alike (options, mesh, planner rules) end the job on every rank
// with one message from the lowest failing rank. Errors of one rank (a device or transport
// fault) print the rank and the message, then abort the job so no rank waits forever.

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"
#include "common/check.hpp"
#include "common/dry_run.hpp"
#include "common/job.hpp"
#include "common/mpi_session.hpp"
#include "common/output_dump.hpp"
#include "common/output_files.hpp"
#include "common/report_json.hpp"
#include "common/run_config.hpp"
#include "common/table.hpp"
#include "common/trace_writer.hpp"
#include "moe_block.hpp"
#include "quantization_check.hpp"
#include "sweep_rows.hpp"

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
  // FNV-1a of this rank's output shards (overlapped, sequential) in the last check round.
  uint64_t out_checksum = 0, sequential_checksum = 0;
  bool detail = true;  // off in a sweep: one line per experiment, a failed check still prints
  std::unique_ptr<QuantizationCheck> quantization;  // quantized GEMMs: against the unquantized

  void note(const std::string& line) const {
    if (detail) say(tag + line);
  }

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
  job.fill_inputs(job.seed());
  job.note("lhs " + shape_str(d.lhs_shape) + " -> local " + shape_str(plan.lhs_local()) + ", rhs " +
           shape_str(d.rhs_shape) + " -> " + shape_str(plan.rhs_local()) + ", out " +
           shape_str(plan.out_global()) + " -> " + shape_str(plan.out_local()));
  job.note("schedule: " + plan.schedule_summary());
  job.note("warm-up " + std::to_string(cfg.warmup) + ", then " + std::to_string(cfg.iterations) +
           (cfg.iterations == 1 ? " timed iteration" : " timed iterations") + " of each path");
  // execute() runs the path the overlap policy picked at planning (auto: a rule, not a timing).
  plan.execute(job.lhs.p, job.rhs.p, job.bias_p(), job.out.p);
  for (int i = 0; i < cfg.warmup; ++i) {
    job.overlapped();
    job.sequential();
  }
  be.synchronize();
  job.note("execute() path: " + plan.path_summary());
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
  j["lhs_spec"] = spec_json(plan.sharding().lhs);
  j["rhs_spec"] = spec_json(plan.sharding().rhs);
  j["out_spec"] = spec_json(plan.sharding().out);
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
  job.note(line);
}

/// One checked call of both paths on fresh inputs (round r), folded into job.checked.
void check_round(GemmJob& job, Backend& be, int round) {
  const GemmDesc& d = job.plan.desc();
  // Fresh inputs, so a chunk read before it arrived (still holding an earlier call's data
  // in the plan's buffers) shows; outputs poisoned so an element nobody wrote fails.
  job.fill_inputs(job.seed() + 10 + static_cast<uint64_t>(round));
  be.fill_nan(job.out.p, d.out_dtype, job.out_n);
  be.fill_nan(job.ref.p, d.out_dtype, job.out_n);
  // Both paths from the same scales: delayed scaling's history moves with every call, so the
  // sequential call starts from the state the overlapped one started from (and leaves the
  // history as one call of this round would).
  const std::vector<float> scales = job.plan.scale_state();
  job.overlapped();
  job.plan.set_scale_state(scales);
  job.sequential();
  be.synchronize();
  const size_t bytes = static_cast<size_t>(job.out_n) * dtype_size(d.out_dtype);
  std::vector<char> h_out(bytes), h_ref(bytes);
  be.copy_to_host(h_out.data(), job.out.p, bytes);
  be.copy_to_host(h_ref.data(), job.ref.p, bytes);
  job.out_checksum = checksum(h_out.data(), bytes);  // the last round's are reported
  job.sequential_checksum = checksum(h_ref.data(), bytes);
  job.checked.merge(
      compare(h_out.data(), h_ref.data(), d.out_dtype, job.out_n, tolerance_for(d.out_dtype)));
  if (job.quantization) job.quantization->round(job.lhs.p, job.rhs.p, job.bias_p(), job.out.p);
}

/// The check's verdict over all ranks and rounds: prints it and fills the report entry.
bool report_check(GemmJob& job) {
  const DType out_dtype = job.plan.desc().out_dtype;
  const CheckStats& s = job.checked;
  {
    // Every rank's shard checksums, in world-rank order: two runs agree bit for bit exactly
    // when these do.
    const int world = world_size();
    uint64_t mine[2] = {job.out_checksum, job.sequential_checksum};
    std::vector<uint64_t> all(2 * static_cast<size_t>(world));
    const watchdog::WaitScope wait("the other ranks' checksums of GEMM '" + job.plan.desc().name +
                                   "'");
    check_mpi(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD),
              "MPI_Allgather(checksums)");
    std::vector<std::string> out, seq;
    for (int r = 0; r < world; ++r) {
      out.push_back(hex64(all[2 * static_cast<size_t>(r)]));
      seq.push_back(hex64(all[2 * static_cast<size_t>(r) + 1]));
    }
    job.report["output_checksums"] = out;
    job.report["sequential_checksums"] = seq;
    job.note(
        "output checksum " + hex64(checksum(all.data(), all.size() * 8)) +
        " (FNV-1a over every rank's overlapped and sequential shards; per rank in the report)");
  }
  int64_t counts[2] = {s.compared, s.failures};
  double errs[2] = {s.max_abs, s.max_rel};
  const watchdog::WaitScope wait("the other ranks' check of GEMM '" + job.plan.desc().name + "'");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce(check counts)");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, errs, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce(check errors)");
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
  if (job.detail || !pass) say(job.tag + line);
  if (job.quantization) {
    // The scales the last call used: the same on every rank and on every mesh, since each
    // per-tensor amax is max-reduced over the job (one scale per global tensor).
    const std::vector<float> st = job.plan.scale_state();
    const size_t half = st.size() / 2;
    nlohmann::json scales;
    for (const auto& [name, at] : {std::pair{"lhs", size_t{0}}, std::pair{"rhs", half}}) {
      scales[name] = {{"scale", st[at + ScaleStateLayout::kScale]},
                      {"scale_inv", st[at + ScaleStateLayout::kScaleInv]},
                      {"amax", st[at + ScaleStateLayout::kAmax]}};
    }
    job.report["scales"] = scales;
    char sline[200];
    std::snprintf(sline, sizeof(sline), "scale_inv lhs %.9g (amax %.9g), rhs %.9g (amax %.9g)",
                  st[ScaleStateLayout::kScaleInv], st[ScaleStateLayout::kAmax],
                  st[half + ScaleStateLayout::kScaleInv], st[half + ScaleStateLayout::kAmax]);
    job.note(sline);
    std::string qline;
    const bool qpass = job.quantization->verdict(job.report, qline);
    if (job.detail || !qpass) say(job.tag + qline);
    return pass && qpass;
  }
  return pass;
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

/// What the job knows of its ranks: printed once, put in every report.
struct JobInfo {
  int world = 1;
  std::vector<std::string> host_of_rank;
  bool tp_local = true;
};

/// One experiment's result: its exit status and its sweep row's results.
struct Outcome : SweepResult {
  int rc = kExitUsage;  // 0, kExitCheckFailed, or kExitUsage (already reported)
};

/// The report's header: where it came from, the config, the mesh, the backend.
nlohmann::json report_header(const RunConfig& cfg, const Context& ctx, const JobInfo& info) {
  nlohmann::json report = provenance_json();
  report["config"] = config_json(cfg);
  report["world_size"] = info.world;
  const MeshComms& comms = ctx.comms();
  report["mesh"] = {{"dp", comms.dp()},
                    {"fsdp", comms.fsdp()},
                    {"tp", comms.tp()},
                    {"tp_groups", comms.tp_groups()},
                    {"dp_groups", comms.dp_groups()},
                    {"fsdp_groups", comms.fsdp_groups()},
                    {"hosts", info.host_of_rank},
                    {"tp_groups_on_one_host", info.tp_local}};
  report["backend"] = ctx.backend().name();
  report["transport"] = ctx.backend().transport();
  report["backend_details"] = ctx.backend().describe();
  report["ranks_per_gpu"] = ctx.ranks_per_gpu();
  report["timing_note"] =
      ctx.ranks_per_gpu() > 1
          ? nlohmann::json("GPU shared by " + std::to_string(ctx.ranks_per_gpu()) +
                           " ranks: times are not a speed measurement")
          : nlohmann::json(nullptr);
  return report;
}

/// What one experiment's run leaves for its report.
struct Measured {
  std::vector<std::unique_ptr<GemmJob>> jobs;
  bool all_passed = true;
  std::vector<TraceSpan> trace;
  std::vector<DumpRecord> dump;
};

/// Times and checks every GEMM of the block, then records the dump and the trace. An error
/// here is one rank's (a device or transport fault): it aborts the job.
void measure_block(const RunConfig& cfg, Context& ctx,
                   std::vector<std::unique_ptr<GemmPlan>>& plans, bool detail, Measured& m) {
  Backend& be = ctx.backend();
  try {
    for (size_t i = 0; i < plans.size(); ++i) {
      m.jobs.push_back(std::make_unique<GemmJob>(be, *plans[i], cfg, i));
      m.jobs.back()->detail = detail;
      if (cfg.check && plans[i]->desc().quantization.mode != ScalingMode::kNoScaling) {
        m.jobs.back()->quantization = std::make_unique<QuantizationCheck>(ctx, *plans[i], cfg.std);
      }
      time_gemm(*m.jobs.back(), be);
    }
    if (cfg.check) {
      for (int round = 0; round < cfg.check_rounds; ++round) {
        for (auto& job : m.jobs) check_round(*job, be, round);
      }
      for (auto& job : m.jobs) m.all_passed = report_check(*job) && m.all_passed;
      // The outputs of the last round, which every backend computes from the same inputs.
      if (!cfg.output_dump.empty()) {
        for (auto& job : m.jobs) {
          m.dump.push_back(gather_output(be, job->plan, job->out.p, MPI_COMM_WORLD));
        }
      }
    }
    if (cfg.trace.empty()) return;
    // GEMMs of the block follow one another on the timeline.
    for (auto& job : m.jobs) {
      append_after(m.trace, trace_call(be, MPI_COMM_WORLD, [&] { job->overlapped(); }),
                   job->plan.desc().name);
    }
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
}

/// Rank 0 writes `path` with `write`; every rank agrees on the outcome.
bool written_by_rank0(const std::function<void()>& write) {
  return all_ranks_ok([&] {
    if (world_rank() == 0) write();
  });
}

/// One experiment on `ctx`: plans, times and checks every GEMM of the block, then writes the
/// output dump, the trace and the report. Each phase ends in the all-ranks agreement. An
/// experiment of a sweep prints nothing but a failed check (the sweep prints its line).
Outcome run_experiment(const RunConfig& cfg, Context& ctx, const JobInfo& info, bool in_sweep) {
  Outcome out;
  out.dp = ctx.comms().dp();
  out.tp = ctx.comms().tp();
  out.backend = ctx.backend().name();
  if (!in_sweep) say("resolved config:\n" + to_ini(cfg));

  // plan: planner errors are the same on every rank, and so are failed allocations (GemmPlan
  // agrees them).
  std::vector<std::unique_ptr<GemmPlan>> plans;
  if (!all_ranks_ok([&] {
        for (const GemmSpec& g : cfg.gemms) {
          plans.push_back(std::make_unique<GemmPlan>(
              ctx,
              with_run_options(tensor_sequence_parallel_gemm(
                                   ctx, g.name, g.collective, cfg.batch, cfg.seq_len, g.hidden_in,
                                   g.hidden_out, cfg.dtype, cfg.bias, cfg.transpose_batch_sequence),
                               cfg)));
        }
      })) {
    return out;
  }

  // run and check
  nlohmann::json report = report_header(cfg, ctx, info);
  Measured m;
  measure_block(cfg, ctx, plans, !in_sweep, m);
  for (auto& job : m.jobs) {
    report["gemms"].push_back(job->report);
    out.overlapped_ms += job->report["overlapped_ms"].get<double>();
    out.sequential_ms += job->report["sequential_ms"].get<double>();
    out.flops += job->plan.local_flops();
  }

  // report: the output dump, the trace, the verdict and the JSON report.
  if (!cfg.output_dump.empty() && cfg.check && !written_by_rank0([&] {
        write_dump(cfg.output_dump, m.dump);
        say("outputs written to " + cfg.output_dump + " (compare two with cgemm-compare)");
      })) {
    return out;
  }
  if (!cfg.trace.empty()) {
    const int lane = std::min(cfg.overlap.num_max_streams, ctx.backend().num_streams());
    const std::string terr = write_trace(
        cfg.trace, m.trace, lane,
        "cgemm overlapped collective GEMMs: " + std::to_string(info.world) + " ranks, dp " +
            std::to_string(ctx.comms().dp()) +
            (ctx.comms().fsdp() > 1 ? " x fsdp " + std::to_string(ctx.comms().fsdp()) : "") +
            " x tp " + std::to_string(ctx.comms().tp()) + ", " + ctx.backend().name() +
            " backend, transport " + ctx.backend().transport(),
        MPI_COMM_WORLD);
    if (terr.empty()) {
      say("trace written to " + cfg.trace + " (Chrome trace JSON) and " + cfg.trace + ".svg");
    }
    if (any_rank_failed(terr)) return out;
  }
  report["checked"] = cfg.check;
  report["passed"] = cfg.check ? nlohmann::json(m.all_passed) : nlohmann::json(nullptr);
  m.jobs.clear();
  plans.clear();
  if (!in_sweep) {
    say(std::string("cgemm-run: ") +
        (cfg.check ? (m.all_passed ? "all checks PASSED" : "a check FAILED") : "checks skipped"));
  }
  if (!in_sweep && ctx.ranks_per_gpu() > 1) {
    say("cgemm-run: GPU shared by " + std::to_string(ctx.ranks_per_gpu()) +
        " ranks: times are not a speed measurement");
  }
  if (!cfg.report.empty() && !written_by_rank0([&] {
        write_replacing("--report", cfg.report, report.dump(2) + "\n");
        say("report written to " + cfg.report);
      })) {
    return out;
  }
  if (cfg.check) {
    out.check = m.all_passed ? "PASSED" : "FAILED";
    for (const auto& g : report["gemms"]) out.failures += g["check"]["failures"].get<int64_t>();
  }
  out.rc = m.all_passed ? 0 : kExitCheckFailed;
  return out;
}

/// The MoE expert block (moe_block.hpp), never in a sweep, as an experiment's outcome.
Outcome run_moe_experiment(const RunConfig& cfg, Context& ctx, const JobInfo& info) {
  const MoeOutcome m = run_moe(cfg, ctx, report_header(cfg, ctx, info));
  Outcome out;
  out.rc = m.rc;
  out.dp = ctx.comms().dp();
  out.tp = ctx.comms().tp();
  out.backend = ctx.backend().name();
  out.overlapped_ms = m.block_ms;
  out.flops = m.flops;
  out.failures = m.failures;
  if (cfg.check) out.check = m.rc == 0 ? "PASSED" : "FAILED";
  return out;
}

/// parse: every experiment's options, mesh rules and values, before the first runs.
ParseResult parse_phase(int argc, char** argv, int world) {
  ParseResult parsed = parse_run_config(argc, argv);
  if (parsed.help) return parsed;
  const size_t n = parsed.experiments.size();
  for (size_t i = 0; i < n; ++i) {
    try {
      resolve_mesh(parsed.experiments[i], planned_world(parsed.experiments[i], world));
      check_values(parsed.experiments[i]);
    } catch (const OptionError& e) {
      if (n == 1) throw;
      throw OptionError("experiment " + std::to_string(i + 1) + "/" + std::to_string(n) + " (" +
                        parsed.labels[i] + "): " + e.what());
    }
  }
  watchdog::start(parsed.experiments.front().timeout, world_rank(), "cgemm-run",
                  [] { abort_world(watchdog::kExitTimeout); });
  return parsed;
}

/// plan: every experiment's block planned without a backend, before anything is created:
/// sizes that overflow and plans that cannot run end the job here, alike on every rank
/// (dry_run.hpp). A sweep's bad value anywhere ends the job before the first run.
std::vector<PlannedBlock> plan_phase(const ParseResult& parsed) {
  std::vector<PlannedBlock> planned;
  const size_t count = parsed.experiments.size();
  for (size_t i = 0; i < count; ++i) {
    try {
      // The MoE experiment plans its grouped GEMMs when it runs (moe_block.hpp).
      planned.push_back(parsed.experiments[i].experiment == Experiment::kMoe
                            ? PlannedBlock{}
                            : plan_block(parsed.experiments[i], world_rank()));
    } catch (const std::exception& e) {
      if (count == 1) throw;
      throw Error("experiment " + std::to_string(i + 1) + "/" + std::to_string(count) + " (" +
                  parsed.labels[i] + "): " + e.what());
    }
  }
  return planned;
}

/// outputs: checked before the run, not after it: a long run must not be lost. Nothing is
/// created or truncated here.
void check_outputs(const RunConfig& first, const Table& rows) {
  if (world_rank() != 0) return;
  for (const NamedPath& out : output_files(first)) {
    if (!out.path.empty()) check_writable(out);
  }
  const std::string header = rows.csv_header();
  const std::string old = first.sweep_csv.empty() ? "" : first_line(first.sweep_csv);
  if (!old.empty() && old + "\n" != header) {
    throw Error("--sweep_csv " + first.sweep_csv +
                ": the file has other columns than this sweep's; give another file");
  }
}

/// What the job prints once of its ranks, with the host names gathered here.
JobInfo describe_job(const Context& ctx, int world) {
  if (!ctx.backend_notice().empty()) say(ctx.backend_notice());
  const MeshComms& comms = ctx.comms();
  say("cgemm-run: " + std::to_string(world) + " ranks, mesh dp=" + std::to_string(comms.dp()) +
      (comms.fsdp() > 1 ? " x fsdp=" + std::to_string(comms.fsdp()) : std::string()) +
      " x tp=" + std::to_string(comms.tp()) + ", backend " + ctx.backend().name() + ", transport " +
      ctx.backend().transport());
  say("tensor-parallel groups (world ranks): " + groups_str(comms.tp_groups()));
  say("data-parallel groups (world ranks):   " + groups_str(comms.dp_groups()));
  if (comms.fsdp() > 1)
    say("fsdp groups (world ranks):           " + groups_str(comms.fsdp_groups()));
  // Where the ranks run: the CUDA backend moves data with copy engines only inside a host.
  JobInfo info{world, host_names(), true};
  int tp_local = comms.tp_group_on_one_node() ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &tp_local, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
            "MPI_Allreduce(tp groups on one host)");
  info.tp_local = tp_local == 1;
  std::string line = "hosts of the ranks:";
  for (int r = 0; r < world; ++r) line += " " + std::to_string(r) + "=" + info.host_of_rank[r];
  say(line);
  say(std::string("tensor-parallel groups on one host: ") + (info.tp_local ? "yes" : "no"));
  say(ctx.backend().describe());
  return info;
}

/// The row of an experiment goes out as it ends: a row is either whole or absent.
void append_row(const RunConfig& cfg, const Table& rows) {
  if (world_rank() != 0) return;
  const size_t last = rows.size() - 1;
  if (!cfg.sweep_csv.empty()) {
    const bool fresh = first_line(cfg.sweep_csv).empty();
    append_text("--sweep_csv", cfg.sweep_csv,
                (fresh ? rows.csv_header() : "") + rows.csv_row(last));
  }
  if (!cfg.sweep_jsonl.empty()) append_text("--sweep_jsonl", cfg.sweep_jsonl, rows.json_line(last));
}

// The phases: parse -> plan -> outputs -> mesh -> memory -> (per experiment: plan -> run ->
// check -> report), each ending in the all-ranks agreement (cgemm-bench's run() has the same).
int run(int argc, char** argv) {
  const int world = world_size();
  ParseResult parsed;
  if (!all_ranks_ok([&] { parsed = parse_phase(argc, argv, world); })) return kExitUsage;
  if (parsed.help) {
    say(parsed.help_text);
    return 0;
  }
  const std::vector<RunConfig>& experiments = parsed.experiments;
  const RunConfig& first = experiments.front();
  const size_t count = experiments.size();

  std::vector<PlannedBlock> planned;
  if (!all_ranks_ok([&] { planned = plan_phase(parsed); })) return kExitUsage;
  if (first.dry_run) {
    for (const RunConfig& exp : experiments) {
      if (const int rc = dry_run(exp, world); rc != 0) return rc;
    }
    return 0;
  }

  Table rows = sweep_table(parsed.swept);
  if (!all_ranks_ok([&] { check_outputs(first, rows); })) return kExitUsage;

  std::unique_ptr<Context> ctx;
  if (!context_for(first, first.tp, first.overlap, ctx)) return kExitUsage;
  // memory: before any buffer, the ranks sharing a host (CPU) or a GPU (CUDA).
  for (size_t i = 0; i < count; ++i) {
    if (any_rank_failed(memory_refusal(experiments[i], planned[i], *ctx))) return kExitUsage;
  }
  const JobInfo info = describe_job(*ctx, world);

  // A sweep prints its config once (the lists in place of the swept values), then a line per
  // experiment; the verdict comes once, after the table.
  const bool sweep = count > 1;
  if (sweep) say("resolved config:\n" + sweep_ini(experiments, parsed.swept));
  int rc = 0;
  for (size_t i = 0; i < count; ++i) {
    const RunConfig& cfg = experiments[i];
    if (!context_for(first, first.tp, cfg.overlap, ctx)) return kExitUsage;
    const Outcome o = cfg.experiment == Experiment::kMoe ? run_moe_experiment(cfg, *ctx, info)
                                                         : run_experiment(cfg, *ctx, info, sweep);
    if (o.rc == kExitUsage) return kExitUsage;
    if (o.rc != 0) rc = o.rc;
    rows.add(sweep_row(i, parsed.labels[i], cfg, o));
    if (sweep) say(experiment_line(i, count, parsed.labels[i], o));
    if (!all_ranks_ok([&] { append_row(cfg, rows); })) return kExitUsage;
  }
  if (sweep) {
    say("\n# cgemm-run sweep: " + std::to_string(count) + " experiments on " +
        std::to_string(world) + " ranks\n#\n" + rows.text() + "# " +
        (!first.check ? "checks skipped" : (rc == 0 ? "all checks PASSED" : "a check FAILED")));
    if (ctx->ranks_per_gpu() > 1) {
      say("cgemm-run: GPU shared by " + std::to_string(ctx->ranks_per_gpu()) +
          " ranks: times are not a speed measurement");
    }
  }
  for (const std::string& path : {first.sweep_csv, first.sweep_jsonl}) {
    if (!path.empty()) say("sweep rows appended to " + path);
  }
  return rc;
}

}  // namespace
}  // namespace cgemm::launcher

int main(int argc, char** argv) {
  return cgemm::launcher::run_tool(argc, argv, "cgemm-run", cgemm::launcher::run, true);
}
