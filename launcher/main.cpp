// cgemm-run: the main job. Every rank parses the same options, builds the dp x tp mesh
// and a backend, then for each GEMM of the block runs the overlapped collective GEMM and
// the non-overlapped reference, times both and checks one against the other.
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

#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"
#include "check.hpp"
#include "job.hpp"
#include "run_config.hpp"
#include "trace_writer.hpp"

namespace cgemm::launcher {
namespace {

nlohmann::json shape_json(const Shape& s) { return nlohmann::json(s); }

std::string comms_host_name() {
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  return std::string(host, static_cast<size_t>(len));
}

/// Runs one GEMM of the block; returns its report entry.
nlohmann::json run_gemm(Context& ctx, GemmPlan& plan, const RunConfig& cfg, size_t index,
                        std::vector<TraceSpan>& trace) {
  Backend& be = ctx.backend();
  const GemmDesc& d = plan.desc();
  const std::string tag = "[" + std::to_string(index + 1) + "/" + std::to_string(cfg.gemms.size()) +
                          " " + d.name + "] ";
  const size_t in_size = dtype_size(d.dtype), out_size = dtype_size(d.out_dtype);
  const int64_t lhs_n = num_elements(plan.lhs_local()), rhs_n = num_elements(plan.rhs_local());
  const int64_t bias_n = d.bias_shape ? num_elements(plan.bias_local()) : 0;
  const int64_t out_n = num_elements(plan.out_local());
  Buffer lhs(be, static_cast<size_t>(lhs_n) * in_size),
      rhs(be, static_cast<size_t>(rhs_n) * in_size),
      bias(be, static_cast<size_t>(std::max<int64_t>(bias_n, 1)) * out_size),
      out(be, static_cast<size_t>(out_n) * out_size),
      ref(be, static_cast<size_t>(out_n) * out_size);
  // Each rank fills its own shards of the global tensors drawn from `seed`.
  const auto fill_inputs = [&](uint64_t seed) {
    be.fill_normal(lhs.p, d.dtype, d.lhs_shape, plan.lhs_local(), plan.lhs_offset(), seed + 1,
                   cfg.std);
    be.fill_normal(rhs.p, d.dtype, d.rhs_shape, plan.rhs_local(), plan.rhs_offset(), seed + 2,
                   cfg.std);
    if (bias_n > 0) {
      be.fill_normal(bias.p, d.out_dtype, *d.bias_shape, plan.bias_local(), plan.bias_offset(),
                     seed + 3, cfg.std);
    }
  };
  const uint64_t seed = cfg.seed + 1000 * index;
  fill_inputs(seed);
  const void* bias_p = bias_n > 0 ? bias.p : nullptr;
  const auto overlapped = [&] { plan.execute_overlapped(lhs.p, rhs.p, bias_p, out.p); };
  const auto reference = [&] { plan.execute_reference(lhs.p, rhs.p, bias_p, ref.p); };

  say(tag + "lhs " + shape_str(d.lhs_shape) + " -> local " + shape_str(plan.lhs_local()) +
      ", rhs " + shape_str(d.rhs_shape) + " -> " + shape_str(plan.rhs_local()) + ", out " +
      shape_str(plan.out_global()) + " -> " + shape_str(plan.out_local()));
  say(tag + "schedule: " + plan.schedule_summary());
  say(tag + "warm-up " + std::to_string(cfg.warmup) + ", then " + std::to_string(cfg.iterations) +
      (cfg.iterations == 1 ? " timed iteration" : " timed iterations") + " of each path");
  // execute() makes the overlap policy's choice on its first call (auto: times both paths).
  plan.execute(lhs.p, rhs.p, bias_p, out.p);
  for (int i = 0; i < cfg.warmup; ++i) {
    overlapped();
    reference();
  }
  be.synchronize();
  say(tag + "execute() path: " + plan.path_summary());
  const auto t_over = time_iterations(be, cfg.iterations, overlapped);
  const auto t_ref = time_iterations(be, cfg.iterations, reference);
  const double med_over = median(t_over), med_ref = median(t_ref);
  const double tflops = plan.local_flops() / (med_over * 1e-3) / 1e12;

  nlohmann::json j;
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
  j["reference_ms"] = med_ref;
  j["overlapped_samples_ms"] = t_over;
  j["reference_samples_ms"] = t_ref;
  j["speedup"] = med_over > 0 ? med_ref / med_over : 0.0;
  j["tflops_per_rank"] = tflops;
  char line[256];
  std::snprintf(
      line, sizeof(line),
      "overlapped %.3f ms | non-overlapped %.3f ms | speed-up %.2fx | %.2f TFLOP/s per rank",
      med_over, med_ref, med_over > 0 ? med_ref / med_over : 0.0, tflops);
  say(tag + line);

  if (cfg.check) {
    // Fresh inputs, so a chunk read before it arrived (still holding an earlier call's data
    // in the plan's buffers) shows; outputs poisoned so an element nobody wrote fails.
    fill_inputs(seed + 10);
    be.fill_nan(out.p, d.out_dtype, out_n);
    be.fill_nan(ref.p, d.out_dtype, out_n);
    overlapped();
    reference();
    be.synchronize();
    std::vector<char> h_out(static_cast<size_t>(out_n) * out_size), h_ref(h_out.size());
    be.copy_to_host(h_out.data(), out.p, h_out.size());
    be.copy_to_host(h_ref.data(), ref.p, h_ref.size());
    const Tolerance tol = tolerance_for(d.out_dtype);
    CheckStats s = compare(h_out.data(), h_ref.data(), d.out_dtype, out_n, tol);
    int64_t counts[2] = {s.compared, s.failures};
    double errs[2] = {s.max_abs, s.max_rel};
    MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, errs, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const bool pass = counts[1] == 0 && counts[0] > 0;
    j["check"] = {{"compared", counts[0]},
                  {"failures", counts[1]},
                  {"max_abs_error", errs[0]},
                  {"max_rel_error", errs[1]},
                  {"rtol", tol.rtol},
                  {"atol", tol.atol},
                  {"passed", pass}};
    std::snprintf(line, sizeof(line),
                  "check %s: %lld elements compared, %lld failures, max abs err %.3g, max rel err "
                  "%.3g (rtol %g, atol %g)",
                  pass ? "PASSED" : "FAILED", static_cast<long long>(counts[0]),
                  static_cast<long long>(counts[1]), errs[0], errs[1], tol.rtol, tol.atol);
    say(tag + line);
  }
  if (!cfg.trace.empty()) {
    // One more overlapped call, traced; ranks start together so their timelines line up.
    be.synchronize();
    MPI_Barrier(MPI_COMM_WORLD);
    be.set_tracing(true);
    overlapped();
    std::vector<TraceSpan> spans = be.take_trace();
    be.set_tracing(false);
    for (TraceSpan& s : spans) trace.push_back(std::move(s));
  }
  return j;
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
    resolve_mesh(cfg, world);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (any_rank_failed(error)) return kExitUsage;

  // Output files are checked before the run, not after it: a long run must not be lost.
  if (world_rank() == 0) {
    for (const auto& [option, path] :
         {std::pair<const char*, std::string>{"--report", cfg.report}, {"--trace", cfg.trace}}) {
      if (path.empty()) continue;
      std::ofstream probe(path, std::ios::app);
      if (!probe) error = std::string(option) + " " + path + ": cannot open the file for writing";
    }
  }
  if (any_rank_failed(error)) return kExitUsage;

  if (cfg.backend == BackendKind::kCuda && !cuda_backend_available()) {
    error = "--backend cuda: no usable GPU on host of rank " + std::to_string(world_rank()) +
            " (or cgemm was built without CUDA); use --backend cpu or auto";
  }
  if (any_rank_failed(error)) return kExitUsage;

  // One rank per GPU. More ranks on a host than it has GPUs: with --backend cuda an error of
  // the launch (one message, every rank alike); with auto the CPU backend, said so (every
  // rank decides alike: the smallest slack over all hosts counts).
  if (cfg.backend != BackendKind::kCpu && cuda_device_count() > 0) {
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int local = 1;
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    int short_of_gpus = local > cuda_device_count() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &short_of_gpus, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    const std::string why = std::to_string(local) + " ranks on host " + comms_host_name() +
                            " but " + std::to_string(cuda_device_count()) + " GPU(s)";
    if (short_of_gpus && cfg.backend == BackendKind::kCuda && local > cuda_device_count()) {
      error = why +
              ": the CUDA backend runs one rank per GPU (start fewer ranks per node, or "
              "use --backend cpu)";
    } else if (short_of_gpus && cfg.backend == BackendKind::kAuto) {
      say("backend auto: a host has more ranks than GPUs (" + why +
          " on this rank's host); using the CPU backend");
      cfg.backend = BackendKind::kCpu;
    }
  }
  if (any_rank_failed(error)) return kExitUsage;

  std::unique_ptr<Context> ctx;
  try {
    ctx = std::make_unique<Context>(MPI_COMM_WORLD, MeshConfig{cfg.dp, cfg.tp, "dp", "tpsp"},
                                    cfg.backend, cfg.overlap);
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
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
  bool all_passed = true;
  std::vector<TraceSpan> trace;
  try {
    for (size_t i = 0; i < plans.size(); ++i) {
      std::vector<TraceSpan> spans;
      nlohmann::json j = run_gemm(*ctx, *plans[i], cfg, i, spans);
      if (j.contains("check") && !j["check"]["passed"].get<bool>()) all_passed = false;
      report["gemms"].push_back(j);
      // GEMMs of the block follow one another on the timeline.
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
