#include "dry_run.hpp"

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "cgemm/runtime/memory_check.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "job.hpp"
#include "output_files.hpp"
#include "printable_text.hpp"

namespace cgemm::launcher {

namespace {

// Whether this cgemm has the CUDA backend (common/CMakeLists.txt), known without a CUDA call.
#ifndef CGEMM_LAUNCHER_CUDA
#define CGEMM_LAUNCHER_CUDA 0
#endif
constexpr bool kCudaBuilt = CGEMM_LAUNCHER_CUDA != 0;

// The checks before a run plan --backend auto as cuda (its workspaces); the dry run plans for
// the backend it predicts (predict_backend) and memory_refusal plans again for the CPU.
BackendKind planned_backend(const RunConfig& cfg) {
  return cfg.backend == BackendKind::kCpu ? BackendKind::kCpu : BackendKind::kCuda;
}

PlanningMesh planning_mesh(const RunConfig& cfg, int rank) {
  PlanningMesh m;
  m.dp = cfg.dp;
  m.tp = cfg.tp;
  m.fsdp = cfg.fsdp;
  m.dp_rank = rank / (cfg.tp * cfg.fsdp);
  m.fsdp_rank = rank / cfg.tp % cfg.fsdp;
  m.tp_rank = rank % cfg.tp;
  return m;
}

PlanningOptions planning_options(const RunConfig& cfg, BackendKind backend) {
  PlanningOptions o;
  o.overlap = cfg.overlap;
  o.backend = backend;
  o.compute_capability = cfg.compute_capability;
  return o;
}

std::vector<PlanDescription> plans_of(const RunConfig& cfg, int rank, BackendKind backend) {
  const PlanningMesh m = planning_mesh(cfg, rank);
  const PlanningOptions o = planning_options(cfg, backend);
  std::vector<PlanDescription> out;
  for (const GemmSpec& g : cfg.gemms) {
    out.push_back(plan_gemm(
        with_run_options(tensor_sequence_parallel_gemm(
                             m, g.name, g.collective, cfg.batch, cfg.seq_len, g.hidden_in,
                             g.hidden_out, cfg.dtype, cfg.bias, cfg.transpose_batch_sequence),
                         cfg),
        m, o));
  }
  return out;
}

// What cgemm-run holds for a block on one rank (launcher/run/main.cpp's GemmJob): every GEMM's
// operands, its reference output and both paths' workspaces for the whole run, and, once
// per process, the largest per-call scratch of the backend (cuBLAS workspaces or the CPU's
// fp64 copies and temporaries, with the check's host copies of an output on the CPU).
int64_t job_bytes(const std::vector<PlanDescription>& plans, BackendKind backend) {
  const std::string what = "bytes of the block";
  int64_t sum = 0, once = 0, fsdp_ring = 0;
  for (const PlanDescription& p : plans) {
    const PlanBytes& b = p.bytes;
    // The plans share one fsdp ring (Context::fsdp_ring_bytes): the largest counts, once.
    sum = checked_add(
        sum, checked_add(checked_add(b.operands(), b.out, what), b.workspace - b.fsdp_ring, what),
        what);
    fsdp_ring = std::max(fsdp_ring, b.fsdp_ring);
    int64_t scratch = b.cublas_workspace;
    if (backend == BackendKind::kCpu) {
      const int64_t nan_fill = checked_bytes(num_elements(p.out_local), sizeof(float), what);
      const int64_t check = checked_add(checked_mul(b.out, 2, what), nan_fill, what);
      scratch = checked_add(b.cpu_fp64_copies, std::max(b.cpu_scratch, check), what);
    }
    once = std::max(once, scratch);
  }
  return checked_add(checked_add(sum, once, what), fsdp_ring, what);
}

std::string bytes_str(int64_t b) {
  static constexpr std::array<const char*, 6> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(b);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < kUnits.size()) {
    v /= 1024.0;
    ++u;
  }
  std::ostringstream s;
  s << b << " bytes";
  if (u > 0) {
    s.precision(3);
    s << " (" << v << " " << kUnits[u] << ")";
  }
  return s.str();
}

// GPUs this process would see, found without a CUDA call: CUDA_VISIBLE_DEVICES when set,
// else the driver's entries in /proc; 0 on a machine without a GPU (a login node).
int visible_gpus_without_cuda() {
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr) {
    std::string s(v);
    if (s.empty() || s == "-1" || s == "NoDevFiles") return 0;
    return static_cast<int>(std::count(s.begin(), s.end(), ',')) + 1;
  }
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    (void)e;
    ++n;
  }
  return ec ? 0 : n;
}

// The job's placement: from MPI (host names and visible GPUs of every rank), or, under
// --ranks_per_node, dp x tp ranks placed N per host "node0", "node1", ...
std::vector<RankPlace> placement(const RunConfig& cfg, int world, int mpi_world) {
  std::vector<RankPlace> places(static_cast<size_t>(world));
  if (cfg.ranks_per_node > 0) {
    const int gpus = cfg.gpus_per_node > 0 ? cfg.gpus_per_node : cfg.ranks_per_node;
    for (int r = 0; r < world; ++r) {
      places[static_cast<size_t>(r)] = {"node" + std::to_string(r / cfg.ranks_per_node),
                                        r % cfg.ranks_per_node, gpus, -1};
    }
  } else {
    const std::vector<std::string> hosts = host_names();
    int my_gpus = cfg.gpus_per_node > 0 ? cfg.gpus_per_node : visible_gpus_without_cuda();
    std::vector<int> gpus(static_cast<size_t>(mpi_world));
    check_mpi(MPI_Gather(&my_gpus, 1, MPI_INT, gpus.data(), 1, MPI_INT, 0, MPI_COMM_WORLD),
              "MPI_Gather(visible GPUs)");
    std::map<std::string, int> seen;
    for (int r = 0; r < world; ++r) {
      RankPlace& p = places[static_cast<size_t>(r)];
      p.host = hosts[static_cast<size_t>(r)];
      p.local_rank = seen[p.host]++;
      p.gpus = gpus[static_cast<size_t>(r)];
    }
  }
  for (RankPlace& p : places) p.gpu = p.gpus > 0 ? p.local_rank % p.gpus : -1;
  return places;
}

std::string shapes_line(const char* what, const Shape& global, const PartitionSpec& spec,
                        const Shape& local) {
  return std::string(what) + " " + shape_str(global) + " " + spec_str(spec) + " -> local " +
         shape_str(local);
}

}  // namespace

PredictedBackend predict_backend(BackendKind asked, bool gpu_sharing, bool cuda_built,
                                 const std::vector<RankPlace>& places) {
  PredictedBackend p;
  if (asked == BackendKind::kCpu) return p;
  // The backend rule's reasons against the CUDA backend, in its order: a rank without a GPU,
  // a GPU of several ranks (unless gpu_sharing), uneven ranks per host.
  std::map<std::string, int> per_host;
  std::map<std::pair<std::string, int>, int> per_gpu;
  for (const RankPlace& r : places) {
    ++per_host[r.host];
    ++per_gpu[{r.host, r.gpu}];
  }
  std::string no_gpu, shared, uneven;
  for (size_t r = 0; r < places.size(); ++r) {
    const RankPlace& pl = places[r];
    if (no_gpu.empty() && (!cuda_built || pl.gpus == 0)) {
      no_gpu = cuda_built ? "rank " + std::to_string(r) + " on host " + pl.host + " sees no GPU"
                          : "this cgemm was built without CUDA";
    }
    if (shared.empty() && pl.gpus > 0 && per_gpu[{pl.host, pl.gpu}] > 1) {
      shared = std::to_string(per_host[pl.host]) + " ranks on host " + pl.host + " but " +
               std::to_string(pl.gpus) + " GPU(s) among them";
    }
  }
  const auto [lo, hi] =
      std::minmax_element(per_host.begin(), per_host.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; });
  if (lo != per_host.end() && lo->second != hi->second) {
    for (const auto& [host, n] : per_host) {
      uneven +=
          (uneven.empty() ? "uneven ranks per host (" : ", ") + host + " " + std::to_string(n);
    }
    uneven += ")";
  }
  std::string against = no_gpu;
  if (against.empty() && !gpu_sharing) against = shared;
  if (against.empty()) against = uneven;
  if (asked == BackendKind::kCuda) {
    p.kind = BackendKind::kCuda;
    p.refusal = against;
    return p;
  }
  if (!against.empty()) {
    p.why = "auto: " + against + ", so a real run takes the CPU backend";
    return p;
  }
  p.kind = BackendKind::kCuda;
  p.why = shared.empty()
              ? "auto: every rank has a GPU of its own, so a real run takes cuda"
              : "auto: " + shared + ", shared under gpu_sharing, so a real run takes cuda";
  return p;
}

int planned_world(const RunConfig& cfg, int mpi_world) {
  if (cfg.ranks_per_node == 0) return mpi_world;
  if (!cfg.dry_run) {
    throw OptionError("--ranks_per_node " + std::to_string(cfg.ranks_per_node) +
                      ": describes a job without running it; it needs --dry_run on");
  }
  if (mpi_world != 1) {
    throw OptionError("--ranks_per_node " + std::to_string(cfg.ranks_per_node) +
                      ": a dry run of a described job runs as one process (mpirun -np 1 or no "
                      "mpirun); inside a job of " +
                      std::to_string(mpi_world) + " ranks the hosts come from MPI");
  }
  if (cfg.tp < 1) {
    throw OptionError("--ranks_per_node " + std::to_string(cfg.ranks_per_node) +
                      ": needs --tp (the described world is dp x fsdp x tp)");
  }
  const int64_t world = static_cast<int64_t>(cfg.dp) * cfg.fsdp * cfg.tp;
  const std::string mesh = "--dp " + std::to_string(cfg.dp) +
                           (cfg.fsdp > 1 ? " x --fsdp " + std::to_string(cfg.fsdp) : "") +
                           " x --tp " + std::to_string(cfg.tp);
  if (world > kMaxDescribedRanks) {
    throw OptionError(mesh + " = " + std::to_string(world) +
                      " ranks: a described dry run (--ranks_per_node) plans and prints at most " +
                      std::to_string(kMaxDescribedRanks) + " ranks, one line each");
  }
  if (world * cfg.tp > kMaxDescribedRankPeers) {
    throw OptionError(mesh +
                      ": a described dry run plans each rank's transfers with each of its TP "
                      "peers, world x tp = " +
                      std::to_string(world * cfg.tp) + " here; at most " +
                      std::to_string(kMaxDescribedRankPeers) + " (2^18)");
  }
  return static_cast<int>(world);
}

void check_values(const RunConfig& cfg) {
  // Inputs are normal(0, std) with |x| <= 5.8 std (cgemm/core/convert.hpp's normal_value); an
  // output element sums K products of about std^2 each, so its scale is std^2 sqrt(K).
  double max = 0.0, tiny = 0.0;  // largest finite and smallest positive (subnormal) value
  switch (cfg.dtype) {
    case DType::kFloat16:
      max = 65504.0;
      tiny = std::ldexp(1.0, -24);
      break;
    case DType::kBFloat16:
      max = 3.3895313892515355e38;
      tiny = std::ldexp(1.0, -133);
      break;
    default:
      max = std::numeric_limits<float>::max();
      tiny = std::numeric_limits<float>::denorm_min();
      break;
  }
  const double s = cfg.std;
  const std::string value = "--std " + [&] {
    std::ostringstream o;
    o << cfg.std;
    return o.str();
  }();
  const std::string dt(dtype_name(cfg.dtype));
  if (!std::isfinite(s) || !(s > 0.0)) {
    throw OptionError(value + ": must be a positive, finite standard deviation");
  }
  int64_t k = 1;
  for (const GemmSpec& g : cfg.gemms) k = std::max(k, g.hidden_in);
  double out_scale = s * s * std::sqrt(static_cast<double>(k));
  const char* out_rule = "std^2 x sqrt(hidden_in)";
  double out_low = out_scale;  // the smallest output scale, for the underflow check
  if (cfg.experiment == Experiment::kMoe) {
    // up = x @ w_up: std^2 sqrt(H); down = up @ w_down: that x std sqrt(F).
    const double up = s * s * std::sqrt(static_cast<double>(cfg.moe.hidden));
    const double down = up * s * std::sqrt(static_cast<double>(cfg.moe.ffn));
    out_scale = std::max(up, down);
    out_low = std::min(up, down);
    out_rule = "std^2 x sqrt(moe_hidden), then x std x sqrt(moe_ffn)";
  }
  if (5.8 * s > max || 5.8 * out_scale > max) {
    std::ostringstream o;
    o << value << ": the ";
    if (5.8 * s > max) {
      o << "inputs (up to 5.8 std)";
    } else {
      o << "outputs (about " << out_rule << " = " << out_scale << ")";
    }
    o << " overflow " << dt << ", whose largest value is " << max;
    throw OptionError(o.str());
  }
  // Values below half the smallest subnormal round to zero: ask for inputs and outputs of
  // at least a few of them.
  if (s < 4.0 * tiny || out_low < 4.0 * tiny) {
    std::ostringstream o;
    o << value << ": the "
      << (s < 4.0 * tiny ? "inputs" : std::string("outputs (about ") + out_rule + ")")
      << " underflow to zero in " << dt << ", whose smallest positive value is " << tiny;
    throw OptionError(o.str());
  }
}

PlannedBlock plan_block(const RunConfig& cfg, int rank) {
  const BackendKind backend = planned_backend(cfg);
  return PlannedBlock{backend, plans_of(cfg, rank, backend)};
}

static nlohmann::json print_dry_run(const RunConfig& cfg, const std::vector<RankPlace>& places,
                                    const PredictedBackend& predicted);

int dry_run(const RunConfig& cfg, int mpi_world) {
  const int world = cfg.dp * cfg.fsdp * cfg.tp;
  const std::vector<RankPlace> places = placement(cfg, world, mpi_world);
  if (world_rank() != 0) return 0;
  // Rank 0 alone from here: an error is printed here, not agreed with ranks that are done.
  try {
    // A described job (--ranks_per_node) runs elsewhere: its GPUs are the described ones.
    const PredictedBackend predicted =
        predict_backend(cfg.backend, cfg.gpu_sharing, kCudaBuilt || cfg.ranks_per_node > 0, places);
    const nlohmann::json report = print_dry_run(cfg, places, predicted);
    if (!cfg.report.empty()) {
      write_replacing("--report", cfg.report, report.dump(2) + "\n");
      say("plan written to " + cfg.report + " (the dry run's report)");
    }
  } catch (const std::exception& e) {
    std::cerr << "cgemm-run: error: " << printable(e.what()) << "\n";
    return kExitUsage;
  }
  return 0;
}

static nlohmann::json shapes_json(const Shape& global, const PartitionSpec& spec,
                                  const Shape& local) {
  return {{"shape", global}, {"spec", spec_str(spec)}, {"local", local}};
}

// Prints the plan and returns it as the report's JSON (the same facts, one key each).
namespace {

// What a described dry run computes once for its parts: every rank's plans and bytes, and how
// many ranks share each host and each GPU.
struct DryRunJob {
  const RunConfig& cfg;
  const std::vector<RankPlace>& places;
  BackendKind backend;
  int world;
  std::vector<std::vector<PlanDescription>> plans;  // by rank, one per GEMM
  std::vector<int64_t> need;                        // by rank
  std::map<std::string, int> per_host;
  std::map<std::pair<std::string, int>, int> per_gpu;
};

DryRunJob plan_dry_run(const RunConfig& cfg, const std::vector<RankPlace>& places,
                       BackendKind backend) {
  DryRunJob j{cfg, places, backend, cfg.dp * cfg.fsdp * cfg.tp, {}, {}, {}, {}};
  const int world = j.world;
  j.need.resize(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    j.plans.push_back(plans_of(cfg, r, backend));
    j.need[static_cast<size_t>(r)] = job_bytes(j.plans.back(), backend);
  }
  for (const RankPlace& p : places) {
    ++j.per_gpu[{p.host, p.gpu}];
    ++j.per_host[p.host];
  }
  return j;
}

// The job's line: ranks, hosts, backend and why; the report's head.
void describe_job(const DryRunJob& j, const PredictedBackend& predicted, std::ostream& out,
                  nlohmann::json& report) {
  const RunConfig& cfg = j.cfg;
  const int world = j.world;
  const BackendKind backend = j.backend;
  const auto& per_host = j.per_host;
  out << "cgemm-run --dry_run: " << world << " ranks (dp " << cfg.dp
      << (cfg.fsdp > 1 ? " x fsdp " + std::to_string(cfg.fsdp) : std::string()) << " x tp "
      << cfg.tp << ") on " << per_host.size() << " host(s)"
      << (cfg.ranks_per_node > 0
              ? ", described as " + std::to_string(cfg.ranks_per_node) + " ranks per host"
              : std::string(", placed by MPI"))
      << "; backend " << backend_name(backend)
      << (predicted.why.empty() ? "" : " (" + predicted.why + ")");
  if (backend == BackendKind::kCuda) out << ", planned for sm " << cfg.compute_capability;
  out << "\n";
  if (!predicted.refusal.empty()) {
    out << "note: a real run of this job would refuse backend cuda: " << predicted.refusal
        << " (planned for cuda as asked)\n";
  }
  out << "nothing created: no backend, no allocation, no CUDA call\n";

  report["dry_run"] = true;
  report["config"] = to_ini(cfg);
  report["world_size"] = world;
  report["mesh"] = {{"dp", cfg.dp}, {"fsdp", cfg.fsdp}, {"tp", cfg.tp}};
  report["backend"] = backend_name(backend);
  report["backend_asked"] = backend_name(cfg.backend);
  report["backend_reason"] =
      predicted.why.empty() ? nlohmann::json(nullptr) : nlohmann::json(predicted.why);
  report["backend_refusal"] =
      predicted.refusal.empty() ? nlohmann::json(nullptr) : nlohmann::json(predicted.refusal);
  report["placement"] = cfg.ranks_per_node > 0 ? "described" : "mpi";
  report["compute_capability"] =
      backend == BackendKind::kCuda ? nlohmann::json(cfg.compute_capability) : nullptr;
}

// Every rank: place, coordinates, transports to its TP peers, bytes.
void describe_ranks(const DryRunJob& j, std::ostream& out, nlohmann::json& report) {
  const RunConfig& cfg = j.cfg;
  const auto& places = j.places;
  const auto& need = j.need;
  const int world = j.world;
  const BackendKind backend = j.backend;
  auto per_gpu = j.per_gpu;
  report["ranks"] = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    const RankPlace& p = places[static_cast<size_t>(r)];
    const int group = r / cfg.tp;
    bool one_host = true;
    for (int q = group * cfg.tp; q < (group + 1) * cfg.tp; ++q) {
      one_host = one_host && places[static_cast<size_t>(q)].host == p.host;
    }
    const std::string transport = predict_transport(
        backend, cfg.tp, one_host, cfg.overlap.use_ce || cfg.gpu_sharing, cfg.transport);
    nlohmann::json rank = {{"rank", r},
                           {"host", p.host},
                           {"local_rank", p.local_rank},
                           {"dp", r / (cfg.tp * cfg.fsdp)},
                           {"fsdp", r / cfg.tp % cfg.fsdp},
                           {"tp", r % cfg.tp},
                           {"bytes", need[static_cast<size_t>(r)]}};
    out << "rank " << r << ": host " << p.host << ", local rank " << p.local_rank;
    if (backend == BackendKind::kCuda) {
      rank["gpu"] = p.gpu < 0 ? nlohmann::json(nullptr) : nlohmann::json(p.gpu);
      rank["gpus_seen"] = p.gpus;
      if (p.gpu < 0) {
        out << ", GPU none (no GPU visible here)";
      } else {
        out << ", GPU " << p.gpu << " of " << p.gpus;
        const int sharing = per_gpu[{p.host, p.gpu}];
        if (sharing > 1) out << " (shared by " << sharing << " ranks)";
      }
    }
    out << ", dp " << r / (cfg.tp * cfg.fsdp);
    if (cfg.fsdp > 1) out << ", fsdp " << r / cfg.tp % cfg.fsdp;
    out << ", tp " << r % cfg.tp << ", to TP peers:";
    if (cfg.tp == 1) out << " none";
    rank["tp_peers"] = nlohmann::json::array();
    for (int t = 0; t < cfg.tp; ++t) {
      if (t == r % cfg.tp) continue;
      out << (t == (r % cfg.tp == 0 ? 1 : 0) ? " " : ", ") << "rank " << group * cfg.tp + t << " "
          << transport;
      rank["tp_peers"].push_back({{"rank", group * cfg.tp + t}, {"transport", transport}});
    }
    out << "; needs " << bytes_str(need[static_cast<size_t>(r)]) << "\n";
    report["ranks"].push_back(std::move(rank));
  }
}

// Every GEMM: specs and shapes, schedule, bytes (rank 0's; the mesh splits evenly, so every
// rank's shards have the same shapes).
void describe_gemms(const DryRunJob& j, std::ostream& out, nlohmann::json& report) {
  const RunConfig& cfg = j.cfg;
  const auto& plans = j.plans;
  const BackendKind backend = j.backend;
  report["gemms"] = nlohmann::json::array();
  for (size_t i = 0; i < cfg.gemms.size(); ++i) {
    const PlanDescription& d = plans[0][i];
    const PlanBytes& b = d.bytes;
    out << "[" << i + 1 << "/" << cfg.gemms.size() << " " << d.desc.name << "] "
        << shapes_line("lhs", d.desc.lhs_shape, d.sharding.lhs, d.lhs_local) << ", "
        << shapes_line("rhs", d.desc.rhs_shape, d.rhs_spec, d.rhs_local);
    nlohmann::json g = {{"name", d.desc.name},
                        {"collective", collective_name(d.desc.collective)},
                        {"lhs", shapes_json(d.desc.lhs_shape, d.sharding.lhs, d.lhs_local)},
                        {"rhs", shapes_json(d.desc.rhs_shape, d.rhs_spec, d.rhs_local)},
                        {"bias", nullptr},
                        {"out", shapes_json(d.out_global, d.sharding.out, d.out_local)},
                        {"schedule", d.schedule_summary},
                        {"chunks", d.chunks},
                        {"chunk_rows", d.chunk_rows}};
    if (d.desc.bias_shape) {
      out << ", " << shapes_line("bias", *d.desc.bias_shape, d.sharding.bias, d.bias_local);
      g["bias"] = shapes_json(*d.desc.bias_shape, d.sharding.bias, d.bias_local);
    }
    out << ", " << shapes_line("out", d.out_global, d.sharding.out, d.out_local) << "\n";
    out << "  schedule: " << d.schedule_summary << "; " << d.chunks << " chunk(s) of "
        << d.chunk_rows << " rows\n";
    // What the overlapped path's exchanges move from this rank (quantized: the 1-byte data).
    int64_t sent = 0;
    std::vector<int64_t> per_exchange;
    for (const ProgramExchange& x : d.overlapped.exchanges) {
      sent += x.bytes;
      per_exchange.push_back(x.bytes);
    }
    if (!per_exchange.empty()) {
      out << "  transfers: " << per_exchange.size() << " exchange(s) of " << per_exchange.front()
          << " bytes, " << sent << " bytes sent per call\n";
    }
    g["exchange_bytes"] = per_exchange;
    out << "  bytes per rank: lhs " << b.lhs << ", rhs " << b.rhs << ", bias " << b.bias << ", out "
        << b.out << "; overlapped workspace " << b.overlapped.total() << " (ring "
        << b.overlapped.ring << ", send " << b.overlapped.send << "), sequential workspace "
        << b.sequential.total() << " (work_in " << b.sequential.work_in << ", work_out "
        << b.sequential.work_out << ")";
    if (b.overlapped.fsdp_ring > 0) out << "; fsdp ring " << b.overlapped.fsdp_ring;
    if (b.overlapped.quant > 0) {
      out << "; quantized operands " << b.overlapped.quant << ", scale state "
          << b.overlapped.scales;
    }
    nlohmann::json bytes = {{"lhs", b.lhs},
                            {"rhs", b.rhs},
                            {"bias", b.bias},
                            {"out", b.out},
                            {"overlapped_workspace",
                             {{"total", b.overlapped.total()},
                              {"ring", b.overlapped.ring},
                              {"send", b.overlapped.send},
                              {"quant", b.overlapped.quant},
                              {"scales", b.overlapped.scales},
                              {"fsdp_ring", b.overlapped.fsdp_ring}}},
                            {"sequential_workspace",
                             {{"total", b.sequential.total()},
                              {"work_in", b.sequential.work_in},
                              {"work_out", b.sequential.work_out}}}};
    if (backend == BackendKind::kCuda) {
      out << "; cuBLAS workspace " << b.cublas_workspace << " (" << b.cublas_workspace_per_stream
          << " per stream)";
      bytes["cublas_workspace"] = b.cublas_workspace;
      bytes["cublas_workspace_per_stream"] = b.cublas_workspace_per_stream;
    } else {
      out << "; fp64 copies " << b.cpu_fp64_copies << ", scratch " << b.cpu_scratch;
      bytes["cpu_fp64_copies"] = b.cpu_fp64_copies;
      bytes["cpu_scratch"] = b.cpu_scratch;
    }
    g["bytes_per_rank"] = std::move(bytes);
    out << "\n";
    report["gemms"].push_back(std::move(g));
  }
}

// What shares one memory, as the memory check before a run sums it.
void describe_memory(const DryRunJob& j, std::ostream& out, nlohmann::json& report) {
  const auto& places = j.places;
  const auto& need = j.need;
  const int world = j.world;
  const BackendKind backend = j.backend;
  auto per_host = j.per_host;
  auto per_gpu = j.per_gpu;
  std::map<std::string, int64_t> host_need;
  std::map<std::pair<std::string, int>, int64_t> gpu_need;
  for (int r = 0; r < world; ++r) {
    const RankPlace& p = places[static_cast<size_t>(r)];
    host_need[p.host] = checked_add(host_need[p.host], need[static_cast<size_t>(r)], "need");
    gpu_need[{p.host, p.gpu}] =
        checked_add(gpu_need[{p.host, p.gpu}], need[static_cast<size_t>(r)], "need");
  }
  report["memory"] = nlohmann::json::array();
  if (backend == BackendKind::kCpu) {
    for (const auto& [host, n] : host_need) {
      out << "host " << host << ": " << per_host[host] << " rank(s) need " << bytes_str(n)
          << " of host memory\n";
      report["memory"].push_back(
          {{"memory", "host"}, {"host", host}, {"ranks", per_host[host]}, {"bytes", n}});
    }
  } else {
    for (const auto& [key, n] : gpu_need) {
      out << "host " << key.first << ", GPU "
          << (key.second < 0 ? std::string("none") : std::to_string(key.second)) << ": "
          << per_gpu[key] << " rank(s) need " << bytes_str(n) << " of GPU memory\n";
      report["memory"].push_back(
          {{"memory", "gpu"},
           {"host", key.first},
           {"gpu", key.second < 0 ? nlohmann::json(nullptr) : nlohmann::json(key.second)},
           {"ranks", per_gpu[key]},
           {"bytes", n}});
    }
  }
}

}  // namespace

static nlohmann::json print_dry_run(const RunConfig& cfg, const std::vector<RankPlace>& places,
                                    const PredictedBackend& predicted) {
  const DryRunJob j = plan_dry_run(cfg, places, predicted.kind);
  std::ostringstream out;
  nlohmann::json report;
  describe_job(j, predicted, out, report);
  describe_ranks(j, out, report);
  describe_gemms(j, out, report);
  describe_memory(j, out, report);
  out << "cgemm-run --dry_run: done (nothing was run)";
  say(out.str());
  return report;
}

std::string memory_refusal(const RunConfig& cfg, const PlannedBlock& planned, const Context& ctx) {
  const BackendKind backend = ctx.backend().kind();
  int64_t mine = 0;
  std::string error;
  try {
    // The block was planned for the backend the options name; auto that became cpu plans
    // again for the bytes the CPU holds.
    mine = job_bytes(planned.backend == backend ? planned.plans
                                                : plans_of(cfg, ctx.comms().world_rank(), backend),
                     backend);
  } catch (const std::exception& e) {
    error = e.what();
  }
  // Planned already before the backend: an error here is one every rank sees alike.
  if (!error.empty()) return error;
  const MemoryCheck c = check_shared_memory(ctx, mine);
  if (c.ok) return {};
  std::ostringstream s;
  s << c.message << " (batch " << cfg.batch << ", seq_len " << cfg.seq_len << ", dtype "
    << dtype_name(cfg.dtype) << ", dp " << cfg.dp
    << (cfg.fsdp > 1 ? " x fsdp " + std::to_string(cfg.fsdp) : std::string()) << " x tp " << cfg.tp
    << ", each rank needs " << bytes_str(mine) << " for the GEMMs:";
  for (const GemmSpec& g : cfg.gemms) {
    s << " " << g.name << " (" << collective_name(g.collective) << ", " << g.hidden_in << " -> "
      << g.hidden_out << ")";
  }
  s << " nothing was allocated; --dry_run prints the bytes of every buffer)";
  return s.str();
}

}  // namespace cgemm::launcher
