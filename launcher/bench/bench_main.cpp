// cgemm-bench: the benchmark of overlapped collective GEMMs. For each case it measures,
// with the backend's timer (CUDA events on GPUs), after warm-up, the median over ranks'
// slowest of >= 20 runs with rotating inputs larger than L2:
//   GEMM alone | collective alone | sequential (collective then GEMM, or GEMM then
//   collective) | overlapped (the ring schedule) | and which path execute()'s auto policy keeps
// and reports TFLOP/s, overlap efficiency = max(GEMM, collective) / overlapped, the speed-up
// over sequential and nccl-tests' bandwidths of the collective (collective_bandwidth.hpp), as a
// table on rank 0 and as CSV, JSON (with the run's metadata) and Markdown files.
// Optional: a CSV of the PyTorch peers (bench/peers/torch_async_tp.py) joined by case.
// With --scaling (delayed, current, ...) every GEMM is quantized: GEMM alone times the FP8
// GEMM on the plan's quantized copies (one sequential call fills them before any timing), the
// collective alone moves the quantized lhs (all-gather) or the bf16 partials (reduce-scatter),
// and sequential and overlapped are the whole calls, quantization included.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/parts/parts.hpp"
#include "bench_config.hpp"
#include "build_info.hpp"
#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "collective_bandwidth.hpp"
#include "common/job.hpp"
#include "common/mpi_session.hpp"
#include "common/output_files.hpp"
#include "common/quantization_options.hpp"
#include "common/run_config.hpp"
#include "common/table.hpp"
#include "common/trace_writer.hpp"
#include "csv_file.hpp"
#include "l2_flush_memory.hpp"
#include "ring_bandwidth.hpp"

namespace cgemm::launcher {
namespace {

using Shape2 = BenchShape;

struct Knobs {
  std::string label = "default";
  OverlapOptions opts;
};

struct Row {
  std::string shape, collective, knobs, path;
  std::string quantization = "none";  // quantization_text()
  int64_t m = 0, n = 0, k = 0;        // the local GEMM of one rank: [m, k] @ [k, n]
  double gemm_ms = 0, coll_ms = 0, seq_ms = 0, over_ms = 0, tflops = 0;
  double efficiency = 0, speedup = 0;
  // nccl-tests' size of the collective, what a ring moves per rank, and the GB/s of the
  // collective alone (algbw, busbw) and of its bytes over the overlapped time.
  int64_t bytes = 0, rank_bytes = 0;
  double algbw = 0, busbw = 0, over_busbw = 0;
  bool auto_overlaps = true;
};

std::string fmt(double v, int prec = 3) { return format_double(v, prec); }

// The knob sweep on the standard shape: each knob moved alone from the defaults.
std::vector<Knobs> knob_sweep(const OverlapOptions& base) {
  std::vector<Knobs> k{{"default", base}};
  const auto add = [&](std::string label, auto&& change) {
    Knobs x{std::move(label), base};
    change(x.opts);
    k.push_back(x);
  };
  add(base.use_ce ? "use_ce=off" : "use_ce=on", [](OverlapOptions& o) { o.use_ce = !o.use_ce; });
  add("aggregate=on", [](OverlapOptions& o) { o.aggregate_all_gather = true; });
  // num_sm_for_communication has no effect (shared_options.cpp's --help): not swept.
  for (int c : {2, 4}) {
    if (c == base.chunks_per_rank) continue;
    add("chunks_per_rank=" + std::to_string(c), [c](OverlapOptions& o) { o.chunks_per_rank = c; });
  }
  for (int st : {1, 2, 3}) {
    if (st == base.num_max_streams) continue;
    add("streams=" + std::to_string(st), [st](OverlapOptions& o) { o.num_max_streams = st; });
  }
  return k;
}

bool quantized(const QuantizationDesc& q) { return q.mode != ScalingMode::kNoScaling; }

// "none", or the scaling and the formats: "current e4m3 x e4m3" (NVFP4: "nvfp4 e2m1 x e2m1").
std::string quantization_text(const QuantizationDesc& q) {
  if (!quantized(q)) return "none";
  const std::string mode = scaling_option_name(q.mode);
  if (is_nvfp4(q.mode)) return mode + " e2m1 x e2m1";
  return mode + " " + fp8_format_name(q.lhs_format) + " x " + fp8_format_name(q.rhs_format);
}

// The sweep's GEMM of a case: bf16 operands, quantized on every call as `q` says.
template <typename Mesh>
GemmDesc case_gemm(const Mesh& mesh, const std::string& name, const Shape2& sh, CollectiveOp op,
                   const QuantizationDesc& q) {
  const bool ag = op == CollectiveOp::kAllGather;
  GemmDesc d =
      tensor_sequence_parallel_gemm(mesh, name, op, sh.batch, sh.seq, ag ? sh.ag_in : sh.rs_in,
                                    ag ? sh.ag_out : sh.rs_out, DType::kBFloat16, false, false);
  d.quantization = q;
  return d;
}

Row measure(Context& ctx, const Shape2& sh, CollectiveOp op, const QuantizationDesc& q,
            const Knobs& knobs, int warmup, int iterations, size_t l2_bytes,
            std::vector<TraceSpan>* trace) {
  Backend& be = ctx.backend();
  const bool ag = op == CollectiveOp::kAllGather;
  GemmPlan plan(ctx, case_gemm(ctx, sh.name + (ag ? "_ag" : "_rs"), sh, op, q));
  const GemmDesc& d = plan.desc();
  const size_t lhs_bytes = static_cast<size_t>(num_elements(plan.lhs_local())) * 2;
  const size_t rhs_bytes = static_cast<size_t>(num_elements(plan.rhs_local())) * 2;
  const size_t out_bytes = static_cast<size_t>(num_elements(plan.out_local())) * 2;
  // Enough input sets that one pass over them does not fit in L2.
  const size_t sets =
      std::max<size_t>(2, (2 * l2_bytes + lhs_bytes - 1) / std::max<size_t>(lhs_bytes, 1));
  std::vector<std::unique_ptr<Buffer>> lhs;
  for (size_t i = 0; i < sets; ++i) {
    lhs.push_back(std::make_unique<Buffer>(be, lhs_bytes));
    be.fill_normal(lhs.back()->p, d.dtype, d.lhs_shape, plan.lhs_local(), plan.lhs_offset(), 11 + i,
                   0.023f);
  }
  Buffer rhs(be, rhs_bytes), out(be, out_bytes);
  be.fill_normal(rhs.p, d.dtype, d.rhs_shape, plan.rhs_local(), plan.rhs_offset(), 7, 0.023f);
  size_t turn = 0;
  const auto next = [&] { return lhs[turn++ % sets]->p; };

  const auto gemm_only = [&] { plan.bench_gemm_only(next(), rhs.p, out.p); };
  const auto coll_only = [&] { plan.bench_collective_only(next(), out.p); };
  const auto sequential = [&] {
    const void* x = next();
    if (quantized(q)) {
      // The pieces alone skip the quantization: the sequential call is the whole one.
      plan.execute_sequential(x, rhs.p, nullptr, out.p);
    } else if (ag) {
      plan.bench_collective_only(x, out.p);
      plan.bench_gemm_only(x, rhs.p, out.p);
    } else {
      plan.bench_gemm_only(x, rhs.p, out.p);
      plan.bench_collective_only(x, out.p);
    }
  };
  const auto overlapped = [&] { plan.execute_overlapped(next(), rhs.p, nullptr, out.p); };

  plan.execute(next(), rhs.p, nullptr, out.p);  // the auto policy decides here
  // The GEMM alone and the collective alone of a quantized plan read its quantized x and w
  // (and the GEMM alone the gathered x): one sequential call leaves real FP8 data there.
  if (quantized(q)) plan.execute_sequential(next(), rhs.p, nullptr, out.p);
  for (int i = 0; i < warmup; ++i) {
    gemm_only();
    coll_only();
    sequential();
    overlapped();
  }
  std::vector<double> t[4];
  for (int i = 0; i < iterations; ++i) {  // interleaved, so drifts hit all four alike
    t[0].push_back(time_iterations(be, 1, gemm_only)[0]);
    t[1].push_back(time_iterations(be, 1, coll_only)[0]);
    t[2].push_back(time_iterations(be, 1, sequential)[0]);
    t[3].push_back(time_iterations(be, 1, overlapped)[0]);
  }
  if (trace != nullptr) append_after(*trace, trace_call(be, MPI_COMM_WORLD, overlapped));
  Row r;
  r.shape = sh.name;
  r.collective = std::string(collective_name(op));
  r.knobs = knobs.label;
  r.quantization = quantization_text(q);
  r.path = plan.path_summary();
  r.auto_overlaps = plan.uses_overlap();
  r.m = ag ? num_elements(plan.lhs_local()) / plan.lhs_local().back() * ctx.comms().tp()
           : num_elements(plan.lhs_local()) / plan.lhs_local().back();
  r.k = plan.lhs_local().back();
  r.n = plan.out_local().back();
  r.gemm_ms = median(t[0]);
  r.coll_ms = median(t[1]);
  r.seq_ms = median(t[2]);
  r.over_ms = median(t[3]);
  r.tflops = plan.local_flops() / (r.over_ms * 1e-3) / 1e12;
  r.efficiency = std::max(r.gemm_ms, r.coll_ms) / r.over_ms;
  r.speedup = r.seq_ms / r.over_ms;
  const int tp = ctx.comms().tp();
  // A quantized all-gather moves the FP8 lhs: one byte an element (the scale_inv aside).
  const size_t gathered = quantized(q) ? lhs_bytes / 2 : lhs_bytes;
  r.bytes = collective_bytes(op, static_cast<int64_t>(ag ? gathered : out_bytes), tp);
  r.rank_bytes = ring_bytes_per_rank(op, r.bytes, tp);
  r.algbw = algbw_gb_s(r.bytes, r.coll_ms);
  r.busbw = busbw_gb_s(op, tp, r.bytes, r.coll_ms);
  r.over_busbw = busbw_gb_s(op, tp, r.bytes, r.over_ms);
  return r;
}

struct Peer {
  double gemm_ms = 0, seq_ms = 0, async_ms = 0;
};

// Reads torch_async_tp.py's CSV: columns by header name; short rows are skipped.
std::map<std::string, Peer> read_peers(const std::string& path) {
  const CsvFile csv = read_csv("--peers", path);
  const size_t c_case = csv.column("case"), c_coll = csv.column("collective"),
               c_gemm = csv.column("gemm_ms"), c_seq = csv.column("sequential_ms"),
               c_async = csv.column("async_tp_ms");
  std::map<std::string, Peer> out;
  for (const std::vector<std::string>& v : csv.rows) {
    if (v.size() < csv.header.size()) continue;
    const auto num = [&](size_t i) { return v[i].empty() ? 0.0 : std::stod(v[i]); };
    out[v[c_case] + "/" + v[c_coll]] = Peer{num(c_gemm), num(c_seq), num(c_async)};
  }
  return out;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

// Digits kept by FLOP/s and GB/s: a CPU's 0.0166 TFLOP/s shows, a GPU's 612.3 keeps one decimal.
constexpr int kSignificant = 3;

// cgemm-bench's results: one column list for cgemm_bench.csv, .json and .md (the Markdown
// merges m, n, k into one column and says which path execute() picks; the JSON gives the
// whole path summary).
Table bench_table() {
  constexpr unsigned kData = Column::kCsv | Column::kJson;
  const auto rate = [](std::string name, std::string title, std::string unit, unsigned formats) {
    return Column{std::move(name), std::move(title), std::move(unit), 1, 1, "",
                  formats,         kSignificant};
  };
  return Table({{"case", "", "", 0, -1, "", Column::kAll},
                {"collective", "", "", 0, -1, "", Column::kAll},
                {"knobs", "", "", 0, -1, "", Column::kAll},
                {"quantization", "", "", 0, -1, "", Column::kAll},
                {"m", "", "", 0, -1, "", kData},
                {"n", "", "", 0, -1, "", kData},
                {"k", "", "", 0, -1, "", kData},
                {"mnk", "local GEMM m x n x k", "", 0, -1, "", Column::kText},
                {"gemm_ms", "GEMM ms", "ms", 4, 3, "", Column::kAll},
                {"collective_ms", "collective ms", "ms", 4, 3, "", Column::kAll},
                {"sequential_ms", "sequential ms", "ms", 4, 3, "", Column::kAll},
                {"overlapped_ms", "overlapped ms", "ms", 4, 3, "", Column::kAll},
                rate("tflops", "TFLOP/s", "TFLOP/s", Column::kAll),
                {"efficiency", "", "", 3, 2, "", Column::kAll},
                {"speedup", "speed-up", "", 3, 2, "x", Column::kAll},
                {"bytes", "bytes", "B", 0, -1, "", Column::kAll},
                {"rank_bytes", "", "", 0, -1, "", kData},
                rate("algbw_gb_s", "algbw GB/s", "GB/s", Column::kAll),
                rate("busbw_gb_s", "busbw GB/s", "GB/s", Column::kAll),
                rate("overlapped_busbw_gb_s", "overlapped busbw GB/s", "GB/s", Column::kAll),
                {"execute_path", "execute() picks", "", 0, -1, "", Column::kCsv | Column::kText},
                {"execute_path", "", "", 0, -1, "", Column::kJson}});
}

/// plan: every case planned without a backend on this rank's place in the mesh, before
/// anything is created: the planner's errors are the same on every rank, so they end the job
/// with one message instead of an abort on each rank.
void plan_cases(const BenchConfig& cfg, int world) {
  PlanningMesh mesh;
  mesh.dp = cfg.dp;
  mesh.tp = world / cfg.dp;
  mesh.dp_rank = world_rank() / mesh.tp;
  mesh.tp_rank = world_rank() % mesh.tp;
  PlanningOptions options;
  options.overlap = cfg.overlap;
  options.backend = cfg.backend == BackendKind::kCpu ? BackendKind::kCpu : BackendKind::kCuda;
  for (const auto& name : cfg.cases) {
    const Shape2& sh = bench_shape(name);
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
      plan_gemm(case_gemm(mesh, sh.name, sh, op, cfg.quantization), mesh, options);
    }
  }
}

/// run: every case, the knob sweep on the first. An error here is one rank's (a device or
/// transport fault): it aborts the job. False when a new Context was refused.
bool measure_cases(const BenchConfig& cfg, int world, std::unique_ptr<Context>& ctx,
                   std::vector<Row>& rows, std::vector<TraceSpan>& trace) {
  for (size_t ci = 0; ci < cfg.cases.size(); ++ci) {
    const Shape2& sh = bench_shape(cfg.cases[ci]);
    const std::vector<Knobs> sweep = ci == 0 && cfg.knobs
                                         ? knob_sweep(cfg.overlap)
                                         : std::vector<Knobs>{{"default", cfg.overlap}};
    for (const Knobs& kn : sweep) {
      if (!context_for(cfg, world / cfg.dp, kn.opts, ctx)) return false;
      try {
        for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
          // aggregate_all_gather only changes the all-gather.
          if (kn.opts.aggregate_all_gather && op != CollectiveOp::kAllGather) continue;
          const bool traced = !cfg.trace.empty() && ci == 0 && kn.label == "default";
          Row r;
          try {
            r = measure(*ctx, sh, op, cfg.quantization, kn, cfg.warmup, cfg.iterations,
                        static_cast<size_t>(cfg.l2_mib * 1048576.0), traced ? &trace : nullptr);
          } catch (const PlanError& e) {
            // A knob the case cannot take (chunks_per_rank that does not divide): planning
            // refuses it the same way on every rank, before any collective, so all skip it.
            if (kn.label == "default") throw;
            say(sh.name + " " + std::string(collective_name(op)) + " [" + kn.label +
                "]: skipped: " + e.what());
            continue;
          }
          say(r.shape + " " + r.collective + " [" + r.knobs + "]" +
              (quantized(cfg.quantization) ? " " + r.quantization : "") + ": gemm " +
              fmt(r.gemm_ms) + " | collective " + fmt(r.coll_ms) + " | sequential " +
              fmt(r.seq_ms) + " | overlapped " + fmt(r.over_ms) + " ms, " +
              format_double(r.tflops, 1, kSignificant) + " TFLOP/s, efficiency " +
              fmt(r.efficiency, 2) + ", speed-up " + fmt(r.speedup, 2) + "x; " +
              std::to_string(r.bytes) + " bytes (" + std::to_string(r.rank_bytes) +
              " sent per rank): algbw " + format_double(r.algbw, 1, kSignificant) + ", busbw " +
              format_double(r.busbw, 1, kSignificant) + " GB/s alone, " +
              format_double(r.over_busbw, 1, kSignificant) +
              " GB/s overlapped; execute(): " + r.path);
          rows.push_back(r);
        }
      } catch (const std::exception& e) {
        abort_job(e.what());
      }
    }
  }
  return true;
}

// "backend: cpu (...)\nmpi: ..." -> {"backend": "cpu (...)", "mpi": ...}: the lines of
// Backend::describe() whose head is one word; the whole text stays in "describe".
nlohmann::json describe_fields(const std::string& machine) {
  nlohmann::json out = nlohmann::json::object();
  std::istringstream in(machine);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos || colon == 0 || line.find(' ') < colon) continue;
    out[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return out;
}

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return std::string(name, static_cast<size_t>(std::max(len, 0)));
}

/// cgemm_bench.json: the run's metadata, then the rows.
nlohmann::ordered_json bench_json(const BenchConfig& cfg, int world, const std::string& command,
                                  const std::string& machine, const Table& table) {
  const std::time_t t = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  const std::string commit = build_info::commit();
  const nlohmann::json fields = describe_fields(machine);
  // The backend that ran (describe()'s first word), not --backend's "auto".
  std::string ran = fields.value("backend", backend_name(cfg.backend));
  ran = ran.substr(0, ran.find(' '));
  nlohmann::ordered_json run = {
      {"date", date},
      {"command", "mpirun -np " + std::to_string(world) + " " + command},
      {"cgemm_version", build_info::version()},
      // null outside a git checkout (build_info says "unknown").
      {"git_commit",
       commit == "unknown" ? nlohmann::ordered_json() : nlohmann::ordered_json(commit)},
      {"host", processor_name()},
      {"ranks", world},
      {"dp", cfg.dp},
      {"tp", world / cfg.dp},
      {"backend", ran},
      {"warmup", cfg.warmup},
      {"iterations", cfg.iterations},
      {"l2_mib", cfg.l2_mib},
      {"quantization", quantization_text(cfg.quantization)},
      {"cases", cfg.cases},
      {"machine", fields},
      {"describe", machine}};
  nlohmann::ordered_json out;
  out["run"] = std::move(run);
  out["results"] = nlohmann::ordered_json::parse(table.json(0));
  return out;
}

/// report: one table, three files, on rank 0.
void write_results(const BenchConfig& cfg, int world, const std::string& command,
                   const std::string& machine, const std::vector<Row>& rows,
                   const std::map<std::string, Peer>& peers) {
  if (world_rank() != 0) return;
  Table table = bench_table();
  for (const Row& r : rows) {
    const std::string picks = r.auto_overlaps ? "overlapped" : "sequential";
    table.add({r.shape,
               r.collective,
               r.knobs,
               r.quantization,
               r.m,
               r.n,
               r.k,
               std::to_string(r.m) + " x " + std::to_string(r.n) + " x " + std::to_string(r.k),
               r.gemm_ms,
               r.coll_ms,
               r.seq_ms,
               r.over_ms,
               r.tflops,
               r.efficiency,
               r.speedup,
               r.bytes,
               r.rank_bytes,
               r.algbw,
               r.busbw,
               r.over_busbw,
               picks,
               r.path});
  }
  std::ostringstream md;
  md << "Run " << now_utc() << ", " << world << " ranks (dp " << cfg.dp << " x tp "
     << world / cfg.dp << "), cgemm " << build_info::version() << " (commit "
     << build_info::commit() << "), command: `mpirun -np " << world << " " << command
     << "`\n\n```\n"
     << machine << "\n```\n\n";
  if (quantized(cfg.quantization)) {
    md << "Quantized: " << quantization_text(cfg.quantization)
       << " (bf16 x and w quantized on every call). GEMM ms: the FP8 GEMM alone on the quantized "
          "copies; sequential and overlapped ms: the whole call, quantization included.\n\n";
  }
  md << table.markdown();
  if (!peers.empty()) {
    md << "\nAgainst PyTorch (same shapes, `bench/peers/torch_async_tp.py`, same machine):\n\n"
       << "| case | collective | torch.mm / cgemm GEMM | torch sequential ms | torch async-TP "
          "ms "
          "| cgemm overlapped ms | cgemm speed-up over async-TP "
          "|\n|---|---|---|---|---|---|---|\n";
    bool async_missing = false;
    for (const Row& r : rows) {
      if (r.knobs != "default") continue;
      auto it = peers.find(r.shape + "/" + r.collective);
      if (it == peers.end()) continue;
      const Peer& p = it->second;
      // The peer writes NaN where it ran no async-TP (tp 1: PyTorch's needs 2 ranks or more,
      // or --no_async): a cell saying so, not "nan" and "nanx".
      const bool async_ran = std::isfinite(p.async_ms) && p.async_ms > 0;
      async_missing = async_missing || !async_ran;
      md << "| " << r.shape << " | " << r.collective << " | " << fmt(p.gemm_ms / r.gemm_ms, 3)
         << " | " << fmt(p.seq_ms) << " | " << (async_ran ? fmt(p.async_ms) : "n/a") << " | "
         << fmt(r.over_ms) << " | " << (async_ran ? fmt(p.async_ms / r.over_ms, 2) + "x" : "n/a")
         << " |\n";
    }
    if (async_missing) {
      md << "\nn/a: the peer ran no async-TP for that row (PyTorch's async-TP needs tp >= 2; the "
            "peer writes NaN at tp 1 or with --no_async).\n";
    }
  }
  const std::string& outdir = cfg.out;
  write_replacing("--out", outdir + "/cgemm_bench.csv", table.csv());
  write_replacing("--out", outdir + "/cgemm_bench.json",
                  bench_json(cfg, world, command, machine, table).dump(2) + "\n");
  write_replacing("--out", outdir + "/cgemm_bench.md", md.str());
  say("\n" + md.str());
  say("written: " + outdir + "/cgemm_bench.{csv,json,md}");
}

void create_out_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("--out " + dir + ": cannot create the folder (" + ec.message() + ")");
}

// The phases, as cgemm-run's: parse -> plan -> outputs -> mesh -> run -> report, each ending
// in the all-ranks agreement.
int run(int argc, char** argv) {
  const int world = world_size();
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  // parse: cgemm-run's shared rows plus the benchmark's own (bench_config.hpp).
  BenchParseResult parsed;
  if (!all_ranks_ok([&] {
        parsed = parse_bench_config(argc, argv);
        const BenchConfig& c = parsed.config;
        if (!parsed.help && world % c.dp != 0) {
          throw OptionError("--dp " + std::to_string(c.dp) + " does not divide the world size " +
                            std::to_string(world));
        }
      })) {
    return kExitUsage;
  }
  if (parsed.help) {
    say(parsed.help_text);
    return 0;
  }
  const BenchConfig& cfg = parsed.config;
  // outputs: checked before the run, not after it; only --out's folder is created here (with
  // its parents: a new folder per run is the usual use). --parts writes only its own files
  // (checked by run_parts).
  if (!all_ranks_ok([&] {
        if (world_rank() != 0) return;
        create_out_folder(cfg.out);
        if (!cfg.parts.empty()) return;
        for (const NamedPath& out : bench_outputs(cfg.out, cfg.trace)) {
          if (!out.path.empty()) check_writable(out);
        }
      })) {
    return kExitUsage;
  }
  watchdog::start(cfg.timeout, world_rank(), "cgemm-bench",
                  [] { abort_world(watchdog::kExitTimeout); });
  if (!cfg.parts.empty()) return parts::run_parts(cfg, command, now_utc());

  std::map<std::string, Peer> peers;
  if (!all_ranks_ok([&] {
        if (!cfg.peers.empty()) peers = read_peers(cfg.peers);
      })) {
    return kExitUsage;
  }
  if (!all_ranks_ok([&] { plan_cases(cfg, world); })) return kExitUsage;
  std::unique_ptr<Context> ctx;
  if (!context_for(cfg, world / cfg.dp, cfg.overlap, ctx)) return kExitUsage;
  if (any_rank_failed(l2_memory_refusal(cfg.l2_mib, *ctx))) return kExitUsage;
  const std::string machine = ctx->backend().describe();
  if (cfg.ring_bandwidth) {
    const int tp = world / cfg.dp;
    if (any_rank_failed(tp < 2 ? "--ring_bandwidth needs tp >= 2 (a ring), got tp " +
                                     std::to_string(tp)
                               : "")) {
      return kExitUsage;
    }
    Table ring({});
    try {
      ring = ring_bandwidth(*ctx, cfg.warmup, cfg.iterations);
    } catch (const std::exception& e) {
      abort_job(e.what());
    }
    if (!all_ranks_ok([&] {
          if (world_rank() != 0) return;
          std::ostringstream md;
          md << "Run " << now_utc() << ", " << world << " ranks (dp " << cfg.dp << " x tp " << tp
             << "), command: `mpirun -np " << world << " " << command << "`\n\n```\n"
             << machine << "\n```\n\n"
             << ring.markdown();
          write_replacing("--out", cfg.out + "/cgemm_ring.csv", ring.csv());
          write_replacing("--out", cfg.out + "/cgemm_ring.md", md.str());
          say("\n" + md.str());
          say("written: " + cfg.out + "/cgemm_ring.{csv,md}");
        })) {
      return kExitUsage;
    }
  }

  std::vector<Row> rows;
  std::vector<TraceSpan> trace;
  if (!measure_cases(cfg, world, ctx, rows, trace)) return kExitUsage;
  ctx.reset();

  if (!all_ranks_ok([&] { write_results(cfg, world, command, machine, rows, peers); })) {
    return kExitUsage;
  }
  if (!cfg.trace.empty()) {
    const std::string werr = write_trace(
        cfg.trace, trace, cfg.overlap.num_max_streams,
        "cgemm-bench: " + cfg.cases[0] + " shape, all-gather then reduce-scatter, overlapped",
        MPI_COMM_WORLD);
    if (any_rank_failed(werr)) return kExitUsage;
  }
  return 0;
}

}  // namespace
}  // namespace cgemm::launcher

int main(int argc, char** argv) {
  return cgemm::launcher::run_tool(argc, argv, "cgemm-bench", cgemm::launcher::run, false);
}
