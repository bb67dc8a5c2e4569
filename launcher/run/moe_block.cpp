// cgemm-run's MoE expert block experiment (moe_block.hpp).

#include "moe_block.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/grouped_plan.hpp"
#include "common/check.hpp"
#include "common/dry_run.hpp"
#include "common/job.hpp"
#include "common/output_files.hpp"
#include "moe_check.hpp"

namespace cgemm::launcher {
namespace {

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// One projection: lhs [T, K] @ rhs [G, K, N] -> out [T, N], its plan and its results.
struct Projection {
  std::string name, lhs_name, rhs_name, out_name;
  std::unique_ptr<GroupedGemmPlan> plan;
  void* lhs = nullptr;
  void* rhs = nullptr;
  void* out = nullptr;
  int64_t k = 0, n = 0;
  std::vector<double> samples_ms;
  GroupedRowsCheck checked;  // this rank's, over the rounds
  void run(std::span<const int32_t> sizes) { plan->execute(sizes, lhs, rhs, nullptr, out); }
};

GroupedGemmDesc projection_desc(const std::string& name, int64_t groups, int64_t tokens, int64_t k,
                                int64_t n, DType dtype) {
  GroupedGemmDesc d;
  d.name = name;
  d.form = GroupedForm::kRaggedRows;
  d.num_groups = groups;
  d.lhs_shape = Shape{tokens, k};
  d.lhs_contracting_dims = {1};
  d.rhs_shape = Shape{groups, k, n};  // w[g] is [K, N]: the brief's w_up [G, H, F]
  d.rhs_contracting_dims = {1};
  d.dtype = dtype;
  return d;
}

std::string sizes_text(const std::vector<int32_t>& sizes) {
  std::ostringstream s;
  s << "[";
  const size_t shown = std::min<size_t>(sizes.size(), 64);
  for (size_t i = 0; i < shown; ++i) s << (i ? " " : "") << sizes[i];
  if (shown < sizes.size()) s << " ... (" << sizes.size() - shown << " more)";
  const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
  s << "] (min " << *lo << ", max " << *hi << ", empty "
    << std::count(sizes.begin(), sizes.end(), 0) << ")";
  return s.str();
}

// The block's buffers and plans on this rank.
struct MoeJob {
  const RunConfig& cfg;
  Backend& be;
  int rank;
  std::vector<int32_t> sizes;
  std::unique_ptr<Buffer> x, w_up, h, w_down, y;
  Projection up, down;

  MoeJob(const RunConfig& c, Backend& b, int r) : cfg(c), be(b), rank(r) {}

  int64_t bytes(int64_t count) const {
    return checked_bytes(count, dtype_size(cfg.dtype), "the MoE block's buffers");
  }
  // The weights are the same on every rank (seed only); the tokens are the rank's own.
  uint64_t seed_of(int tensor, int round, bool per_rank) const {
    return cfg.seed * 1000003ull + static_cast<uint64_t>(round) * 101ull +
           static_cast<uint64_t>(tensor) +
           (per_rank ? 7919ull * (static_cast<uint64_t>(rank) + 1) : 0);
  }
  void fill(void* p, const Shape& s, uint64_t seed) {
    be.fill_normal(p, cfg.dtype, s, s, Shape(s.size(), 0), seed, cfg.std);
  }
  void fill_inputs(int round) {
    fill(x->p, up.plan->desc().lhs_shape, seed_of(1, round, true));
    fill(w_up->p, up.plan->desc().rhs_shape, seed_of(2, round, false));
    fill(w_down->p, down.plan->desc().rhs_shape, seed_of(3, round, false));
  }
  void block() {
    up.run(sizes);
    down.run(sizes);
  }
  std::vector<float> host(const void* p, int64_t count) {
    std::vector<char> raw(static_cast<size_t>(bytes(count)));
    be.copy_to_host(raw.data(), p, raw.size());
    return values_as_float(raw.data(), cfg.dtype, count);
  }
};

// Plans both projections: errors (the planner's, the runtime's refusals) are the same on
// every rank.
void plan_block(MoeJob& job) {
  const MoeOptions& m = job.cfg.moe;
  job.up.name = "moe_up";
  job.up.lhs_name = "x";
  job.up.rhs_name = "w_up";
  job.up.out_name = "h";
  job.up.k = m.hidden;
  job.up.n = m.ffn;
  job.down.name = "moe_down";
  job.down.lhs_name = "h";
  job.down.rhs_name = "w_down";
  job.down.out_name = "y";
  job.down.k = m.ffn;
  job.down.n = m.hidden;
  for (Projection* p : {&job.up, &job.down}) {
    p->plan = std::make_unique<GroupedGemmPlan>(
        job.be, projection_desc(p->name, m.experts, m.tokens, p->k, p->n, job.cfg.dtype));
    p->plan->check_group_sizes(job.sizes);
  }
  // Sizes are checked as bytes before anything is allocated.
  job.bytes(checked_mul(m.tokens, std::max(m.hidden, m.ffn), "the MoE block's activations"));
  job.bytes(checked_mul(checked_mul(m.experts, m.hidden, "the expert weights"), m.ffn,
                        "the expert weights"));
}

// What the block holds on this rank, for the memory check before allocate(): its five
// buffers, and on the CPU backend (whose buffers share host memory with them) the check's host
// copies at their peak (check_round: the inputs and an output as floats, the raw weights, the
// fp64 reference and magnitudes of an output).
int64_t block_bytes(const MoeJob& job, bool cpu) {
  const MoeOptions& m = job.cfg.moe;
  const std::string what = "the MoE block's buffers";
  const int64_t weights = checked_mul(checked_mul(m.experts, m.hidden, what), m.ffn, what);
  const int64_t acts =
      checked_add(checked_mul(m.tokens, m.hidden, what), checked_mul(m.tokens, m.ffn, what), what);
  int64_t n = checked_add(checked_mul(weights, 2, what),
                          checked_add(acts, checked_mul(m.tokens, m.hidden, what), what), what);
  int64_t total = job.bytes(n);
  if (cpu) {
    const int64_t floats =
        checked_add(checked_add(acts, checked_mul(m.tokens, m.hidden, what), what), weights, what);
    const int64_t ref = checked_mul(m.tokens, std::max(m.hidden, m.ffn), what);
    total = checked_add(total, checked_bytes(floats, sizeof(float), what), what);
    total = checked_add(total, job.bytes(weights), what);
    total = checked_add(total, checked_bytes(ref, 2 * sizeof(double), what), what);
  }
  return total;
}

void allocate(MoeJob& job) {
  const MoeOptions& m = job.cfg.moe;
  const auto buffer = [&](int64_t count) {
    return std::make_unique<Buffer>(job.be, static_cast<size_t>(job.bytes(count)));
  };
  job.x = buffer(m.tokens * m.hidden);
  job.w_up = buffer(m.experts * m.hidden * m.ffn);
  job.h = buffer(m.tokens * m.ffn);
  job.w_down = buffer(m.experts * m.ffn * m.hidden);
  job.y = buffer(m.tokens * m.hidden);
  job.up.lhs = job.x->p;
  job.up.rhs = job.w_up->p;
  job.up.out = job.h->p;
  job.down.lhs = job.h->p;
  job.down.rhs = job.w_down->p;
  job.down.out = job.y->p;
}

// One checked round: fresh inputs, poisoned outputs, the block, each projection against its
// fp64 reference.
void check_round(MoeJob& job, int round) {
  const MoeOptions& m = job.cfg.moe;
  job.fill_inputs(round + 1);
  job.be.fill_nan(job.h->p, job.cfg.dtype, m.tokens * m.ffn);
  job.be.fill_nan(job.y->p, job.cfg.dtype, m.tokens * m.hidden);
  job.block();
  job.be.synchronize();
  const double eps = output_eps(job.cfg.dtype);
  const double acc = accumulation_eps(job.be.kind() == BackendKind::kCuda);
  const double tiny = output_tiny(job.cfg.dtype);
  const std::vector<float> x = job.host(job.x->p, m.tokens * m.hidden);
  std::vector<float> w = job.host(job.w_up->p, m.experts * m.hidden * m.ffn);
  const std::vector<float> h = job.host(job.h->p, m.tokens * m.ffn);
  job.up.checked.merge(
      check_ragged_rows(x, w, h, job.sizes, m.hidden, m.ffn, m.check_rows, eps, acc, tiny));
  w = job.host(job.w_down->p, m.experts * m.ffn * m.hidden);
  const std::vector<float> y = job.host(job.y->p, m.tokens * m.hidden);
  job.down.checked.merge(
      check_ragged_rows(h, w, y, job.sizes, m.ffn, m.hidden, m.check_rows, eps, acc, tiny));
}

// The check's verdict of one projection over the ranks: printed, in the report; true: passed.
bool report_check(Projection& p, const RunConfig& cfg, nlohmann::json& entry) {
  const GroupedRowsCheck& c = p.checked;
  int64_t counts[3] = {c.compared, c.failures, c.rows};
  double errs[2] = {c.max_abs, c.max_ratio};
  const watchdog::WaitScope wait("the other ranks' check of '" + p.name + "'");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce(MoE check counts)");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, errs, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce(MoE check errors)");
  const bool pass = counts[1] == 0 && counts[0] > 0;
  entry["check"] = {{"compared", counts[0]},           {"rows", counts[2]},
                    {"failures", counts[1]},           {"max_abs_error", errs[0]},
                    {"max_error_over_bound", errs[1]}, {"eps", output_eps(cfg.dtype)},
                    {"tiny", output_tiny(cfg.dtype)},  {"rows_per_group", cfg.moe.check_rows},
                    {"rounds", cfg.check_rounds},      {"passed", pass}};
  char line[400];
  std::snprintf(line, sizeof(line),
                "[%s] check %s: %lld elements (%lld rows, every rank, %d round%s) against the "
                "fp64 reference per group, %lld failures, max abs err %.3g, max err / bound %.3g",
                p.name.c_str(), pass ? "PASSED" : "FAILED", static_cast<long long>(counts[0]),
                static_cast<long long>(counts[2]), cfg.check_rounds,
                cfg.check_rounds == 1 ? "" : "s", static_cast<long long>(counts[1]), errs[0],
                errs[1]);
  say(line);
  // The first failure of this rank goes to stderr from every failing rank.
  if (!c.first_failure.empty()) {
    std::fprintf(stderr, "cgemm-run: rank %d: [%s] first failure: %s\n", world_rank(),
                 p.name.c_str(), c.first_failure.c_str());
  }
  return pass;
}

double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; }

}  // namespace

MoeOutcome run_moe(const RunConfig& cfg, Context& ctx, nlohmann::json report) {
  MoeOutcome out;
  Backend& be = ctx.backend();
  const MoeOptions& m = cfg.moe;
  say("resolved config:\n" + to_ini(cfg));
  MoeJob job(cfg, be, world_rank());
  if (!all_ranks_ok([&] {
        job.sizes = route_tokens(m.router, m.tokens, m.experts, m.empty_groups, cfg.seed);
        plan_block(job);
      })) {
    return out;
  }
  // memory: as cgemm-run's check of its GEMM blocks, before any buffer of the block.
  {
    int64_t mine = 0;
    std::string error;
    try {
      mine = block_bytes(job, be.kind() == BackendKind::kCpu);
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (error.empty()) {
      const MemoryCheck c = check_shared_memory(ctx, mine);
      if (!c.ok) {
        error = c.message + " (the MoE block: " + std::to_string(m.tokens) + " tokens, " +
                std::to_string(m.experts) + " experts, hidden " + std::to_string(m.hidden) +
                ", ffn " + std::to_string(m.ffn) + ", " + std::string(dtype_name(cfg.dtype)) +
                "; each rank needs " + std::to_string(mine) + " bytes" +
                " for its buffers and the check; nothing was allocated)";
      }
    }
    if (any_rank_failed(error)) return out;
  }
  const double flops_up = job.up.plan->flops(job.sizes);
  const double flops_down = job.down.plan->flops(job.sizes);
  const double flops_block = flops_up + flops_down;
  say("moe block: " + std::to_string(m.tokens) + " tokens x " + std::to_string(m.experts) +
      " experts, hidden " + std::to_string(m.hidden) + ", ffn " + std::to_string(m.ffn) + ", " +
      std::string(dtype_name(cfg.dtype)) + ", router " + moe_router_name(m.router) + " (seed " +
      std::to_string(cfg.seed) + ", " + std::to_string(m.empty_groups) +
      " groups emptied); every rank runs it on its own (same weights, its own tokens)");
  say("group sizes (tokens per expert, sorted by expert): " + sizes_text(job.sizes));
  const auto count = [](int n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  say("warm-up: " + count(cfg.warmup, "untimed call") + " of the block, then " +
      count(cfg.iterations, "timed call") + " each of up, down and the block");

  bool passed = true;
  try {
    allocate(job);
    job.fill_inputs(0);
    for (int i = 0; i < cfg.warmup; ++i) job.block();
    be.synchronize();
    job.up.samples_ms = time_iterations(be, cfg.iterations, [&] { job.up.run(job.sizes); });
    job.down.samples_ms = time_iterations(be, cfg.iterations, [&] { job.down.run(job.sizes); });
    const std::vector<double> block_ms = time_iterations(be, cfg.iterations, [&] { job.block(); });
    out.block_ms = median(block_ms);
    out.flops = flops_block;

    nlohmann::json moe = {{"tokens", m.tokens},
                          {"experts", m.experts},
                          {"hidden", m.hidden},
                          {"ffn", m.ffn},
                          {"router", moe_router_name(m.router)},
                          {"empty_groups", m.empty_groups},
                          {"group_sizes", job.sizes},
                          {"dtype", dtype_name(cfg.dtype)},
                          {"ranks", world_size()}};
    for (Projection* p : {&job.up, &job.down}) {
      const GroupedGemmDesc& d = p->plan->desc();
      const double flops = p->plan->flops(job.sizes), ms = median(p->samples_ms);
      char line[400];
      std::snprintf(line, sizeof(line),
                    "[%s] %s %s @ %s %s -> %s %s: %.3f ms, %.3g TFLOP/s per rank (%.4g GFLOP: "
                    "2 x %lld routed tokens x %lld x %lld)",
                    p->name.c_str(), p->lhs_name.c_str(), shape_text(d.lhs_shape).c_str(),
                    p->rhs_name.c_str(), shape_text(d.rhs_shape).c_str(), p->out_name.c_str(),
                    shape_text(p->plan->out_shape()).c_str(), ms, tflops(flops, ms), flops / 1e9,
                    static_cast<long long>(m.tokens), static_cast<long long>(p->k),
                    static_cast<long long>(p->n));
      say(line);
      moe["projections"].push_back({{"name", p->name},
                                    {"lhs_shape", d.lhs_shape},
                                    {"rhs_shape", d.rhs_shape},
                                    {"out_shape", p->plan->out_shape()},
                                    {"flops", flops},
                                    {"median_ms", ms},
                                    {"samples_ms", p->samples_ms},
                                    {"tflops_per_rank", tflops(flops, ms)}});
    }
    char line[300];
    std::snprintf(line, sizeof(line),
                  "[block] up + down: %.3f ms, %.3g TFLOP/s per rank (%.4g GFLOP)", out.block_ms,
                  tflops(flops_block, out.block_ms), flops_block / 1e9);
    say(line);
    moe["block"] = {{"flops", flops_block},
                    {"median_ms", out.block_ms},
                    {"samples_ms", block_ms},
                    {"tflops_per_rank", tflops(flops_block, out.block_ms)}};
    if (cfg.check) {
      for (int round = 0; round < cfg.check_rounds; ++round) check_round(job, round);
      size_t i = 0;
      for (Projection* p : {&job.up, &job.down}) {
        passed = report_check(*p, cfg, moe["projections"][i++]) && passed;
        out.failures += moe["projections"][i - 1]["check"]["failures"].get<int64_t>();
      }
    }
    report["moe"] = moe;
  } catch (const std::exception& e) {
    abort_job(e.what());
  }
  report["checked"] = cfg.check;
  report["passed"] = cfg.check ? nlohmann::json(passed) : nlohmann::json(nullptr);
  say(std::string("cgemm-run: ") +
      (cfg.check ? (passed ? "all checks PASSED" : "a check FAILED") : "checks skipped"));
  if (ctx.ranks_per_gpu() > 1) {
    say("cgemm-run: GPU shared by " + std::to_string(ctx.ranks_per_gpu()) +
        " ranks: times are not a speed measurement");
  }
  if (!cfg.report.empty() && !all_ranks_ok([&] {
        if (world_rank() != 0) return;
        write_replacing("--report", cfg.report, report.dump(2) + "\n");
        say("report written to " + cfg.report);
      })) {
    return out;
  }
  out.rc = passed ? 0 : kExitCheckFailed;
  return out;
}

}  // namespace cgemm::launcher
