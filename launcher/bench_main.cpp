// cgemm-bench: the benchmark of overlapped collective GEMMs. For each case it measures,
// with the backend's timer (CUDA events on GPUs), after warm-up, the median over ranks'
// slowest of >= 20 runs with rotating inputs larger than L2:
//   GEMM alone | collective alone | sequential (collective then GEMM, or GEMM then
//   collective) | overlapped (the ring schedule) | and which path execute()'s auto policy keeps
// and reports TFLOP/s, overlap efficiency = max(GEMM, collective) / overlapped and the
// speed-up over sequential, as a table on rank 0 and as CSV, JSON and Markdown files.
// Optional: a CSV of the PyTorch peers (bench/peers/torch_async_tp.py) joined by case.

#include <mpi.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cgemm/runtime/context.hpp"
#include "cgemm/runtime/plan.hpp"
#include "job.hpp"
#include "output_files.hpp"
#include "run_config.hpp"
#include "table.hpp"
#include "trace_writer.hpp"

namespace cgemm::launcher {
namespace {

namespace po = boost::program_options;

// The shapes of the sweep (docs/PERFORMANCE.md reports them). hidden sizes are the
// global K -> N of each projection; batch and seq are global.
struct Shape2 {
  std::string name;
  int64_t batch, seq;
  int64_t ag_in, ag_out;  // all-gather GEMM (column-parallel up projection)
  int64_t rs_in, rs_out;  // reduce-scatter GEMM (row-parallel down projection)
};
const std::vector<Shape2> kShapes = {
    {"standard", 4, 8192, 4096, 8192, 8192, 4096},
    {"llama70b", 1, 8192, 8192, 28672, 28672, 8192},
    {"gpt3_175b", 1, 4096, 12288, 49152, 49152, 12288},
    {"small", 1, 2048, 4096, 4096, 4096, 4096},
    {"tiny", 2, 64, 64, 128, 128, 64},  // for tests on CPUs
};

struct Knobs {
  std::string label = "default";
  OverlapOptions opts;
};

struct Row {
  std::string shape, collective, knobs, path;
  int64_t m = 0, n = 0, k = 0;  // the local GEMM of one rank: [m, k] @ [k, n]
  double gemm_ms = 0, coll_ms = 0, seq_ms = 0, over_ms = 0, tflops = 0;
  double efficiency = 0, speedup = 0;
  bool auto_overlaps = true;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string fmt(double v, int prec = 3) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(prec);
  s << v;
  return s.str();
}

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
  for (int sms : {1, 2, 4, 8}) {
    if (sms == base.num_sm_for_communication) continue;
    add("num_sm=" + std::to_string(sms),
        [sms](OverlapOptions& o) { o.num_sm_for_communication = sms; });
  }
  for (int st : {1, 2, 3}) {
    if (st == base.num_max_streams) continue;
    add("streams=" + std::to_string(st), [st](OverlapOptions& o) { o.num_max_streams = st; });
  }
  return k;
}

Row measure(Context& ctx, const Shape2& sh, CollectiveOp op, const Knobs& knobs, int warmup,
            int iterations, size_t l2_bytes, std::vector<TraceSpan>* trace) {
  Backend& be = ctx.backend();
  const bool ag = op == CollectiveOp::kAllGather;
  GemmPlan plan(
      ctx, tensor_sequence_parallel_gemm(ctx, sh.name + (ag ? "_ag" : "_rs"), op, sh.batch, sh.seq,
                                         ag ? sh.ag_in : sh.rs_in, ag ? sh.ag_out : sh.rs_out,
                                         DType::kBFloat16, false, false));
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
    if (ag) {
      plan.bench_collective_only(x, out.p);
      plan.bench_gemm_only(x, rhs.p, out.p);
    } else {
      plan.bench_gemm_only(x, rhs.p, out.p);
      plan.bench_collective_only(x, out.p);
    }
  };
  const auto overlapped = [&] { plan.execute_overlapped(next(), rhs.p, nullptr, out.p); };

  plan.execute(next(), rhs.p, nullptr, out.p);  // the auto policy decides here
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
  return r;
}

struct Peer {
  double gemm_ms = 0, seq_ms = 0, async_ms = 0;
};

// Reads torch_async_tp.py's CSV: columns by header name.
std::map<std::string, Peer> read_peers(const std::string& path) {
  std::map<std::string, Peer> out;
  std::ifstream f(path);
  if (!f) throw Error("--peers: cannot read '" + path + "'");
  std::string line;
  std::getline(f, line);
  std::vector<std::string> cols;
  {
    std::stringstream in(line);
    std::string c;
    while (std::getline(in, c, ',')) cols.push_back(c);
  }
  const auto col = [&](const std::string& name) {
    auto it = std::find(cols.begin(), cols.end(), name);
    if (it == cols.end()) throw Error("--peers: '" + path + "' has no column '" + name + "'");
    return static_cast<size_t>(it - cols.begin());
  };
  const size_t c_case = col("case"), c_coll = col("collective"), c_gemm = col("gemm_ms"),
               c_seq = col("sequential_ms"), c_async = col("async_tp_ms");
  while (std::getline(f, line)) {
    std::vector<std::string> v;
    std::stringstream in(line);
    std::string c;
    while (std::getline(in, c, ',')) v.push_back(c);
    if (v.size() < cols.size()) continue;
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

// cgemm-bench's results: one column list for cgemm_bench.csv, .json and .md (the Markdown
// merges m, n, k into one column and says which path execute() picks; the JSON gives the
// whole path summary).
Table bench_table() {
  constexpr unsigned kData = Column::kCsv | Column::kJson;
  return Table({{"case", "", "", 0, -1, "", Column::kAll},
                {"collective", "", "", 0, -1, "", Column::kAll},
                {"knobs", "", "", 0, -1, "", Column::kAll},
                {"m", "", "", 0, -1, "", kData},
                {"n", "", "", 0, -1, "", kData},
                {"k", "", "", 0, -1, "", kData},
                {"mnk", "local GEMM m x n x k", "", 0, -1, "", Column::kText},
                {"gemm_ms", "GEMM ms", "ms", 4, 3, "", Column::kAll},
                {"collective_ms", "collective ms", "ms", 4, 3, "", Column::kAll},
                {"sequential_ms", "sequential ms", "ms", 4, 3, "", Column::kAll},
                {"overlapped_ms", "overlapped ms", "ms", 4, 3, "", Column::kAll},
                {"tflops", "TFLOP/s", "TFLOP/s", 1, 1, "", Column::kAll},
                {"efficiency", "", "", 3, 2, "", Column::kAll},
                {"speedup", "speed-up", "", 3, 2, "x", Column::kAll},
                {"execute_path", "execute() picks", "", 0, -1, "", Column::kCsv | Column::kText},
                {"execute_path", "", "", 0, -1, "", Column::kJson}});
}

std::vector<NamedPath> bench_outputs(const std::string& outdir, const std::string& trace) {
  std::vector<NamedPath> out;
  for (const char* ext : {"csv", "json", "md"}) {
    out.push_back({"--out's cgemm_bench." + std::string(ext), outdir + "/cgemm_bench." + ext});
  }
  out.push_back({"--trace", trace});
  if (!trace.empty()) out.push_back({"--trace's SVG", trace + ".svg"});
  return out;
}

int run(int argc, char** argv) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::string cases_text, outdir, peers_path, trace_path, backend_text;
  int dp = 1, warmup = 5, iterations = 20;
  bool knobs = true;
  double l2_mib = 60;
  OverlapOptions base;
  po::options_description desc(
      "Usage: mpirun -np N cgemm-bench [options]\n"
      "Benchmarks the overlapped collective GEMMs of cgemm against GEMM alone, collective alone\n"
      "and the sequential path (bf16, tp = world / dp). Times in ms are medians over ranks'\n"
      "slowest of the timed iterations; TFLOP/s per GPU; efficiency = max(GEMM, collective) /\n"
      "overlapped; speed-up = sequential / overlapped.\nOptions");
  std::string knobs_text = "on";
  desc.add_options()("help,h", "print this help and exit")(
      "cases", po::value(&cases_text)->default_value("standard,llama70b,gpt3_175b,small"),
      "comma-separated shapes: standard (batch 4, seq 8192, AG 4096->8192, RS 8192->4096), "
      "llama70b (seq 8192, AG 8192->28672, RS 28672->8192), gpt3_175b (seq 4096, "
      "AG 12288->49152, RS 49152->12288), small (seq 2048, 4096->4096), tiny (for CPUs)")(
      "knobs", po::value(&knobs_text)->default_value("on"),
      "on|off: also sweep the overlap knobs (use_ce, aggregate_all_gather, "
      "num_sm_for_communication 1/2/4/8, num_max_streams 1/2/3) on the first case")(
      "dp", po::value(&dp)->default_value(1), "data-parallel size; tp = world / dp [ranks]")(
      "warmup", po::value(&warmup)->default_value(5), "untimed runs of each path [iterations]")(
      "iterations", po::value(&iterations)->default_value(20),
      "timed runs of each path (at least 20 for reported figures) [iterations]")(
      "l2_mib", po::value(&l2_mib)->default_value(60),
      "L2 size: inputs rotate over enough copies to exceed twice this [MiB]")(
      "backend", po::value(&backend_text)->default_value("auto"), "auto | cpu | cuda")(
      "use_ce", po::value(&base.use_ce)->default_value(true),
      "default transport: copy engines (1) or NCCL (0)")(
      "num_max_streams", po::value(&base.num_max_streams)->default_value(3),
      "default compute streams")(
      "out", po::value(&outdir)->default_value("."),
      "folder for cgemm_bench.csv, cgemm_bench.json and cgemm_bench.md [path]")(
      "peers", po::value(&peers_path),
      "CSV of bench/peers/torch_async_tp.py to compare against, joined by case [path]")(
      "trace", po::value(&trace_path),
      "trace one overlapped call of each first-case collective (Chrome JSON; FILE.svg too) [path]");
  std::string error;
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (knobs_text != "on" && knobs_text != "off") throw Error("--knobs must be on or off");
    knobs = knobs_text == "on";
    if (iterations < 1 || warmup < 0 || dp < 1)
      throw Error("--iterations >= 1, --warmup >= 0, --dp >= 1");
    if (world % dp != 0)
      throw Error("--dp " + std::to_string(dp) + " does not divide the world size " +
                  std::to_string(world));
    for (const auto& c : split(cases_text)) {
      if (std::none_of(kShapes.begin(), kShapes.end(),
                       [&](const Shape2& s) { return s.name == c; })) {
        throw Error("--cases: unknown case '" + c +
                    "' (known: standard, llama70b, gpt3_175b, small, tiny)");
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (error.empty() && !vm.count("help")) {
    try {
      if (vm.count("out") && outdir.empty()) throw Error("--out \"\": an empty path");
      if (vm.count("trace") && trace_path.empty()) throw Error("--trace \"\": an empty path");
      check_distinct(bench_outputs(outdir, trace_path), {{"--peers", peers_path}});
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (error.empty() && !vm.count("help") && world_rank() == 0) {
    // Output files are checked before the run, not after it; nothing is created here.
    try {
      for (const NamedPath& out : bench_outputs(outdir, trace_path)) {
        if (!out.path.empty()) check_writable(out);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (vm.count("help") && error.empty()) {
    std::ostringstream s;
    s << desc;
    say(s.str());
    return 0;
  }
  if (any_rank_failed(error)) return kExitUsage;

  std::map<std::string, Peer> peers;
  try {
    if (!peers_path.empty()) peers = read_peers(peers_path);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (any_rank_failed(error)) return kExitUsage;

  std::vector<Row> rows;
  std::vector<TraceSpan> trace;
  std::string machine;
  const auto names = split(cases_text);
  BackendKind backend = BackendKind::kAuto;
  try {
    backend = parse_backend(backend_text);
  } catch (const std::exception& e) {
    error = "--backend " + backend_text + ": " + e.what();
  }
  if (any_rank_failed(error)) return kExitUsage;
  // Plan every case first on a CPU context: the planner's errors are the same on every rank,
  // so they end the job with one message instead of an abort on each rank.
  try {
    Context probe(MPI_COMM_WORLD, MeshConfig{dp, world / dp, "dp", "tpsp"}, BackendKind::kCpu,
                  base);
    for (const auto& name : names) {
      const Shape2& sh = *std::find_if(kShapes.begin(), kShapes.end(),
                                       [&](const Shape2& s) { return s.name == name; });
      for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
        const bool ag = op == CollectiveOp::kAllGather;
        GemmPlan check(probe, tensor_sequence_parallel_gemm(
                                  probe, sh.name, op, sh.batch, sh.seq, ag ? sh.ag_in : sh.rs_in,
                                  ag ? sh.ag_out : sh.rs_out, DType::kBFloat16, false, false));
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (any_rank_failed(error)) return kExitUsage;
  try {
    for (size_t ci = 0; ci < names.size(); ++ci) {
      const Shape2& sh = *std::find_if(kShapes.begin(), kShapes.end(),
                                       [&](const Shape2& s) { return s.name == names[ci]; });
      const std::vector<Knobs> sweep =
          ci == 0 && knobs ? knob_sweep(base) : std::vector<Knobs>{{"default", base}};
      for (const Knobs& kn : sweep) {
        Context ctx(MPI_COMM_WORLD, MeshConfig{dp, world / dp, "dp", "tpsp"}, backend, kn.opts);
        if (machine.empty()) machine = ctx.backend().describe();
        for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
          // aggregate_all_gather only changes the all-gather.
          if (kn.opts.aggregate_all_gather && op != CollectiveOp::kAllGather) continue;
          const bool traced = !trace_path.empty() && ci == 0 && kn.label == "default";
          Row r = measure(ctx, sh, op, kn, warmup, iterations,
                          static_cast<size_t>(l2_mib * 1048576.0), traced ? &trace : nullptr);
          say(r.shape + " " + r.collective + " [" + r.knobs + "]: gemm " + fmt(r.gemm_ms) +
              " | collective " + fmt(r.coll_ms) + " | sequential " + fmt(r.seq_ms) +
              " | overlapped " + fmt(r.over_ms) + " ms, " + fmt(r.tflops, 1) +
              " TFLOP/s, efficiency " + fmt(r.efficiency, 2) + ", speed-up " + fmt(r.speedup, 2) +
              "x; execute(): " + r.path);
          rows.push_back(r);
        }
      }
    }
  } catch (const std::exception& e) {
    abort_job(e.what());
  }

  // Outputs, rank 0 only: one table, three files.
  std::string werr;
  if (world_rank() == 0) {
    try {
      Table table = bench_table();
      for (const Row& r : rows) {
        const std::string picks = r.auto_overlaps ? "overlapped" : "sequential";
        table.add({r.shape, r.collective, r.knobs, r.m, r.n, r.k,
                   std::to_string(r.m) + " x " + std::to_string(r.n) + " x " + std::to_string(r.k),
                   r.gemm_ms, r.coll_ms, r.seq_ms, r.over_ms, r.tflops, r.efficiency, r.speedup,
                   picks, r.path});
      }
      std::ostringstream md;
      std::string cmd;
      for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
      md << "Run " << now_utc() << ", " << world << " ranks (dp " << dp << " x tp " << world / dp
         << "), command: `mpirun -np " << world << " " << cmd << "`\n\n```\n"
         << machine << "\n```\n\n"
         << table.markdown();
      if (!peers.empty()) {
        md << "\nAgainst PyTorch (same shapes, `bench/peers/torch_async_tp.py`, same machine):\n\n"
           << "| case | collective | torch.mm / cgemm GEMM | torch sequential ms | torch async-TP "
              "ms "
              "| cgemm overlapped ms | cgemm speed-up over async-TP "
              "|\n|---|---|---|---|---|---|---|\n";
        for (const Row& r : rows) {
          if (r.knobs != "default") continue;
          auto it = peers.find(r.shape + "/" + r.collective);
          if (it == peers.end()) continue;
          const Peer& p = it->second;
          md << "| " << r.shape << " | " << r.collective << " | " << fmt(p.gemm_ms / r.gemm_ms, 3)
             << " | " << fmt(p.seq_ms) << " | " << fmt(p.async_ms) << " | " << fmt(r.over_ms)
             << " | " << fmt(p.async_ms / r.over_ms, 2) << "x |\n";
        }
      }
      write_replacing("--out", outdir + "/cgemm_bench.csv", table.csv());
      write_replacing("--out", outdir + "/cgemm_bench.json", table.json(2));
      write_replacing("--out", outdir + "/cgemm_bench.md", md.str());
      say("\n" + md.str());
      say("written: " + outdir + "/cgemm_bench.{csv,json,md}");
    } catch (const std::exception& e) {
      werr = e.what();
    }
  }
  if (any_rank_failed(werr)) return kExitUsage;
  if (!trace_path.empty()) {
    werr = write_trace(
        trace_path, trace, base.num_max_streams,
        "cgemm-bench: " + names[0] + " shape, all-gather then reduce-scatter, overlapped",
        MPI_COMM_WORLD);
    if (any_rank_failed(werr)) return kExitUsage;
  }
  return 0;
}

}  // namespace
}  // namespace cgemm::launcher

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  cgemm::launcher::set_program_name("cgemm-bench");
  const int rc = cgemm::launcher::run(argc, argv);
  MPI_Finalize();
  return rc;
}
