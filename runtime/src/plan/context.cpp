#include "cgemm/runtime/context.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "cgemm/collective/watchdog_channel.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/runtime/plan_description.hpp"
#include "program/shared_ring.hpp"
#include "transport_table.hpp"

namespace cgemm {

namespace {

int world_size(MPI_Comm world) {
  int size = 0;
  check_mpi(MPI_Comm_size(world, &size), "MPI_Comm_size");
  return size;
}

constexpr int kUuidChars = 32;  // cuda_device_uuids(): 32 hex digits

// Fixed-width UUID records for MPI: `count` UUIDs of kUuidChars characters, back to back.
std::vector<char> pack_uuids(const std::vector<std::string>& uuids) {
  std::vector<char> out(uuids.size() * kUuidChars, '\0');
  for (size_t i = 0; i < uuids.size(); ++i) {
    std::memcpy(out.data() + i * kUuidChars, uuids[i].data(),
                std::min<size_t>(uuids[i].size(), kUuidChars));
  }
  return out;
}

// Every rank of `comm` contributes `mine` (a multiple of kUuidChars); returns all of them.
std::set<std::string> all_uuids(MPI_Comm comm, const std::vector<char>& mine) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size(node)");
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  check_mpi(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), "MPI_Allgather(uuids)");
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  std::vector<char> all(static_cast<size_t>(std::max(total, 1)));
  check_mpi(MPI_Allgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(),
                           MPI_CHAR, comm),
            "MPI_Allgatherv(uuids)");
  std::set<std::string> out;
  for (int i = 0; i + kUuidChars <= total; i += kUuidChars) {
    out.emplace(all.data() + i, kUuidChars);
  }
  return out;
}

// The lowest world rank for which `bad` holds, or -1 when none (collective over world).
int lowest_rank_where(bool bad, const MeshComms& comms) {
  int r = bad ? comms.world_rank() : INT_MAX;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_INT, MPI_MIN, comms.world()),
            "MPI_Allreduce(backend rule)");
  return r == INT_MAX ? -1 : r;
}

std::string host_of(int world_rank, const MeshComms& comms) {
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  const std::string mine = comms.host_name();
  if (comms.world_rank() == world_rank) {
    std::strncpy(host, mine.c_str(), sizeof(host) - 1);
  }
  check_mpi(MPI_Bcast(host, sizeof(host), MPI_CHAR, world_rank, comms.world()),
            "MPI_Bcast(host name)");
  return host;
}

struct BackendChoice {
  BackendKind kind = BackendKind::kCpu;
  CudaPlacement placement;
  int ranks_per_gpu = 1;  // the most on one GPU anywhere in the job
  std::string notice;
};

// The backend rule (context.hpp), decided alike on every rank.
BackendChoice choose_backend(const MeshComms& comms, const BackendOptions& opts) {
  BackendChoice c;
  if (opts.kind == BackendKind::kCpu) return c;
  const std::vector<std::string> uuids = cuda_device_uuids();
  if (const int r = lowest_rank_where(uuids.empty(), comms); r >= 0) {
    if (opts.kind == BackendKind::kCuda) {
      throw BackendRuleError("backend cuda: rank " + std::to_string(r) + " on host " +
                             host_of(r, comms) +
                             " sees no usable GPU (or cgemm was built without CUDA); use "
                             "backend cpu or auto");
    }
    return c;  // auto without GPUs: the CPU backend, as expected on a CPU machine
  }
  // This rank's GPU, and how many ranks of its host chose the same one (by UUID).
  c.placement.device = comms.local_rank() % static_cast<int>(uuids.size());
  const std::string& mine = uuids[static_cast<size_t>(c.placement.device)];
  {
    std::vector<char> chosen = pack_uuids({mine});
    std::vector<char> all(chosen.size() * static_cast<size_t>(comms.local_size()));
    check_mpi(MPI_Allgather(chosen.data(), kUuidChars, MPI_CHAR, all.data(), kUuidChars, MPI_CHAR,
                            comms.node_comm()),
              "MPI_Allgather(chosen GPU)");
    int same = 0;
    for (int r = 0; r < comms.local_size(); ++r) {
      if (std::memcmp(all.data() + static_cast<size_t>(r) * kUuidChars, chosen.data(),
                      kUuidChars) == 0) {
        ++same;
      }
    }
    c.placement.ranks_per_gpu = same;
  }
  const int host_gpus = static_cast<int>(all_uuids(comms.node_comm(), pack_uuids(uuids)).size());
  c.ranks_per_gpu = c.placement.ranks_per_gpu;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &c.ranks_per_gpu, 1, MPI_INT, MPI_MAX, comms.world()),
            "MPI_Allreduce(ranks per GPU)");
  if (c.ranks_per_gpu == 1) {
    c.kind = BackendKind::kCuda;
    return c;
  }
  // Some GPU has more than one rank: name the first host where that happens, with its counts.
  const int r = lowest_rank_where(c.placement.ranks_per_gpu > 1, comms);
  int counts[2] = {comms.local_size(), host_gpus};
  check_mpi(MPI_Bcast(counts, 2, MPI_INT, r, comms.world()), "MPI_Bcast(GPU counts)");
  const std::string why = std::to_string(counts[0]) + " ranks on host " + host_of(r, comms) +
                          " but " + std::to_string(counts[1]) + " GPU(s) among them";
  if (opts.gpu_sharing) {
    c.kind = BackendKind::kCuda;
    c.placement.gpu_sharing = true;
    c.notice = "gpu_sharing: " + why + "; up to " + std::to_string(c.ranks_per_gpu) +
               " ranks share a GPU (copy-engine transport, no NCCL). GPU shared by " +
               std::to_string(c.ranks_per_gpu) + " ranks: times are not a speed measurement";
    return c;
  }
  if (opts.kind == BackendKind::kCuda) {
    throw BackendRuleError(why +
                           ": the CUDA backend runs one rank per GPU (start fewer ranks per "
                           "host, set gpu_sharing = on to let ranks share a GPU for correctness "
                           "runs, or use backend cpu)");
  }
  c.notice = "backend auto: " + why +
             "; using the CPU backend (gpu_sharing = on runs the CUDA "
             "backend with ranks sharing a GPU)";
  return c;
}

// Facts of the launch every rank checks alike: uneven ranks per host (a known cause of NCCL
// hangs) refuse the CUDA backend; tensor-parallel groups that span hosts although every host
// could hold one are worth a warning with the fix. Returns the warning ("" when none).
std::string check_placement(const MeshComms& comms, BackendChoice& choice, BackendKind asked) {
  const BackendKind kind = choice.kind;
  const int world = comms.world_size();
  std::vector<int> local(static_cast<size_t>(world));
  int mine = comms.local_size();
  check_mpi(MPI_Allgather(&mine, 1, MPI_INT, local.data(), 1, MPI_INT, comms.world()),
            "MPI_Allgather(ranks per host)");
  std::vector<char> names(static_cast<size_t>(world) * MPI_MAX_PROCESSOR_NAME, '\0');
  std::string me = comms.host_name();
  me.resize(MPI_MAX_PROCESSOR_NAME - 1, '\0');
  check_mpi(MPI_Allgather(me.c_str(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                          MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comms.world()),
            "MPI_Allgather(host names)");
  std::map<std::string, int> per_host;
  for (int r = 0; r < world; ++r) {
    per_host[std::string(names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME)] =
        local[static_cast<size_t>(r)];
  }
  const auto [lo, hi] = std::minmax_element(local.begin(), local.end());
  if (*lo != *hi && kind == BackendKind::kCuda) {
    std::string counts;
    for (const auto& [host, n] : per_host) {
      counts += (counts.empty() ? "" : ", ") + host + " " + std::to_string(n);
    }
    const std::string why = "uneven ranks per host (" + counts +
                            "): NCCL communicators over uneven hosts are a known cause of hangs";
    if (asked == BackendKind::kCuda) {
      throw BackendRuleError(why + "; start the same number of ranks on every host");
    }
    choice = BackendChoice{};  // auto: the CPU backend, said so
    choice.notice = "backend auto: " + why + "; using the CPU backend";
  }
  int spans = comms.tp_group_on_one_node() ? 0 : 1;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &spans, 1, MPI_INT, MPI_MAX, comms.world()),
            "MPI_Allreduce(TP groups on one host)");
  if (spans != 0 && *lo >= comms.tp() && *lo % comms.tp() == 0) {
    return "warning: tensor-parallel groups span hosts although every host holds " +
           std::to_string(*lo) + " ranks, a multiple of tp = " + std::to_string(comms.tp()) +
           ": a TP group is tp consecutive world ranks, so place ranks by host in blocks (mpirun "
           "--map-by slot, srun --distribution=block) and the TP traffic stays inside a host";
  }
  return "";
}

// Whether the caller lends an NCCL communicator (BackendOptions::nccl_comm): every rank of the
// world or none, and only to a cgemm built with CUDA; refused alike on every rank otherwise.
bool lends_nccl_comm(const MeshComms& comms, const BackendOptions& opts) {
  const int mine = opts.nccl_comm != nullptr ? 1 : 0;
  int range[2] = {-mine, mine};  // -min, max
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_INT, MPI_MAX, comms.world()),
            "MPI_Allreduce(nccl_comm given)");
  if (range[1] == 0) return false;
  if (-range[0] != range[1]) {
    throw BackendRuleError("nccl_comm: world rank " +
                           std::to_string(lowest_rank_where(mine == 0, comms)) +
                           " passes no NCCL communicator while others do: every rank lends "
                           "one (over its TP group) or none");
  }
  if (!cuda_backend_built()) {
    throw BackendRuleError(
        "nccl_comm: a borrowed NCCL communicator needs the CUDA backend, and this cgemm was "
        "built without CUDA (-DCGEMM_WITH_CUDA=OFF); create the context without one");
  }
  return true;
}

// The CUDA backend where making it can fail in one TP group and not another (a borrowed NCCL
// communicator, UCX): every rank of the job learns whether any failed, else the others would
// finish their contexts and hang in the caller's next collective. One message everywhere: the
// rank's own, or `elsewhere`. `what` names the allreduce in an MPI error.
std::unique_ptr<Backend> make_cuda_backend_agreed(const MeshComms& comms,
                                                  const OverlapOptions& opts,
                                                  const CudaPlacement& placement,
                                                  TransportKind transport, const char* what,
                                                  const char* elsewhere) {
  std::unique_ptr<Backend> b;
  std::string error;
  try {
    b = make_cuda_backend(comms, opts, placement, transport);
  } catch (const std::exception& e) {
    error = e.what();
  }
  int failed = error.empty() ? 0 : 1;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, comms.world()), what);
  if (failed != 0) {
    b.reset();
    throw BackendRuleError(error.empty() ? std::string(elsewhere) : error);
  }
  return b;
}

}  // namespace

Context::Context(MPI_Comm world, const MeshConfig& mesh, const BackendOptions& backend,
                 const OverlapOptions& overlap)
    : mesh_config_(mesh),
      overlap_(overlap),
      fsdp_ring_(std::make_unique<SharedRing>(Group::kFsdp, "fsdp ring")),
      fsdp_reorder_(std::make_unique<SharedRing>(Group::kFsdp, "fsdp reorder buffer")) {
  const int size = world_size(world);
  if (mesh_config_.dp < 1 || size % mesh_config_.dp != 0) {
    throw Error("mesh: dp=" + std::to_string(mesh_config_.dp) + " does not divide the world size " +
                std::to_string(size));
  }
  if (mesh_config_.fsdp < 1 || size / mesh_config_.dp % mesh_config_.fsdp != 0) {
    throw Error("mesh: dp=" + std::to_string(mesh_config_.dp) +
                " x fsdp=" + std::to_string(mesh_config_.fsdp) +
                " does not divide the world size " + std::to_string(size));
  }
  if (mesh_config_.tp == 0) mesh_config_.tp = size / mesh_config_.dp / mesh_config_.fsdp;
  require_axis_names(mesh_config_.dp_axis, mesh_config_.tpsp_axis, mesh_config_.fsdp,
                     mesh_config_.fsdp_axis);
  if (overlap_.num_max_streams < 1) {
    throw Error("num_max_streams must be >= 1, got " + std::to_string(overlap_.num_max_streams));
  }
  int world_rank = 0;
  check_mpi(MPI_Comm_rank(world, &world_rank), "MPI_Comm_rank");
  // Every wait from here on has a deadline; the program name is the caller's if it started the
  // watchdog already (cgemm-run does, to cover its own barriers too).
  watchdog::start(backend.timeout_s, world_rank, "", [] { abort_world(watchdog::kExitTimeout); });
  const watchdog::WaitScope bootstrap(
      "the bootstrap of the mesh and the backend (MPI communicators, the backend rule, NCCL, "
      "CUDA IPC) with the other ranks");
  mesh_.axes = {{mesh_config_.dp_axis, mesh_config_.dp}, {mesh_config_.tpsp_axis, mesh_config_.tp}};
  resource_.dp_resource = mesh_config_.dp_axis;
  resource_.tpsp_resource = mesh_config_.tpsp_axis;
  if (mesh_config_.fsdp > 1) {  // without, the dp x tp mesh as before the axis existed
    mesh_.axes.insert(mesh_.axes.begin() + 1, {mesh_config_.fsdp_axis, mesh_config_.fsdp});
    resource_.fsdp_resource = mesh_config_.fsdp_axis;
  }
  comms_ = std::make_unique<MeshComms>(world, mesh_config_.dp, mesh_config_.tp, mesh_config_.fsdp);
  install_watchdog_channel(*comms_);
  const bool borrows_nccl = lends_nccl_comm(*comms_, backend);

  BackendChoice choice = choose_backend(*comms_, backend);
  notice_ = choice.notice;
  if (const std::string w = check_placement(*comms_, choice, backend.kind); !w.empty()) {
    notice_ += (notice_.empty() ? "" : "\n") + w;
  }
  if (choice.placement.gpu_sharing && comms_->tp() > 1) {
    // Decided alike everywhere: a shared GPU has no transport but the copy engines.
    if (!overlap_.use_ce) {
      throw BackendRuleError(
          "gpu_sharing: use_ce = off asks for NCCL, and NCCL refuses two ranks of one "
          "communicator on one GPU; keep use_ce = on while GPUs are shared");
    }
    int spans = comms_->tp_group_on_one_node() ? 0 : 1;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &spans, 1, MPI_INT, MPI_MAX, comms_->world()),
              "MPI_Allreduce(TP groups on one host)");
    if (spans != 0) {
      throw BackendRuleError(
          "gpu_sharing: a tensor-parallel group spans hosts, and the copy engines reach only "
          "peers on the same host (NCCL is not allowed while GPUs are shared)");
    }
  }
  if (borrows_nccl) {
    // Decided alike everywhere (the choice is), before the backend's collectives.
    if (choice.kind != BackendKind::kCuda) {
      const std::string why = backend.kind == BackendKind::kCpu ? "backend cpu was asked for"
                              : notice_.empty() ? "the backend rule chose it: some rank sees no GPU"
                                                : notice_;
      throw BackendRuleError(
          "nccl_comm: a borrowed NCCL communicator needs the CUDA backend, but the backend is "
          "cpu (" +
          why + ")");
    }
    if (choice.placement.gpu_sharing) {
      throw BackendRuleError(
          "nccl_comm: a borrowed NCCL communicator cannot be used while ranks share a GPU "
          "(gpu_sharing: NCCL refuses two ranks of one communicator on one GPU)");
    }
    choice.placement.nccl_comm = backend.nccl_comm;
  }
  ranks_per_gpu_ = choice.kind == BackendKind::kCuda ? choice.ranks_per_gpu : 1;
  ranks_sharing_memory_ =
      choice.kind == BackendKind::kCuda ? choice.placement.ranks_per_gpu : comms_->local_size();
  if (choice.kind == BackendKind::kCuda) {
    if (const std::string why = transport_backend_refusal(backend.transport, BackendKind::kCuda);
        !why.empty()) {
      throw BackendRuleError(why);
    }
  }
  if (choice.kind == BackendKind::kCuda && backend.nccl_comm != nullptr) {
    // A borrowed communicator is checked inside its TP group (nccl_transport.cpp); with dp >
    // 1 the other replicas would finish their contexts and hang in the caller's next
    // collective. Every rank of the job learns whether any group refused it.
    backend_ = make_cuda_backend_agreed(
        *comms_, overlap_, choice.placement,
        backend.transport == TransportKind::kUcx ? TransportKind::kUcx : TransportKind::kAuto,
        "MPI_Allreduce(borrowed NCCL communicator checked)",
        "nccl_comm: another data-parallel replica's borrowed NCCL communicator was refused (see "
        "its message)");
    // Every rank's backend stands on its communicator: now its members, over the communicator
    // itself (every member of each takes part), one message on every rank when they are wrong.
    try {
      check_borrowed_nccl_members(*comms_, backend.nccl_comm);
    } catch (const std::exception& e) {
      backend_.reset();
      throw BackendRuleError(e.what());
    }
    return;
  }
  if (choice.kind != BackendKind::kCuda) {
    backend_ = make_cpu_backend(*comms_, overlap_, backend.transport);
    return;
  }
  // The CUDA backend's transports: auto as before; nccl turns the copy engines off; ce must
  // reach every peer of every TP group; ucx stages device buffers through pinned host memory.
  // The option is the job's, so mpi was refused alike everywhere above, and ce and ucx are
  // agreed over the world (a TP group whose UCX fails must not leave the other replicas
  // waiting).
  if (backend.transport == TransportKind::kUcx) {
    backend_ = make_cuda_backend_agreed(
        *comms_, overlap_, choice.placement, TransportKind::kUcx,
        "MPI_Allreduce(UCX reaches every peer)",
        "transport = ucx: another tensor-parallel group could not use UCX (see its message)");
    return;
  }
  OverlapOptions cuda_overlap = overlap_;
  if (backend.transport == TransportKind::kNccl) cuda_overlap.use_ce = false;
  if (backend.transport == TransportKind::kCe) {
    // The table's rule for what a job's options alone decide (the group's hosts are asked of
    // the made transport below: only it can tell whether CUDA IPC is allowed).
    const TransportOffer o =
        offer_transport(TransportKind::kCe, GroupView{.backend = BackendKind::kCuda,
                                                      .size = comms_->tp(),
                                                      .on_one_host = true,
                                                      .use_ce = cuda_overlap.use_ce});
    if (!o.served()) throw BackendRuleError(o.refusal);
  }
  backend_ = make_cuda_backend(*comms_, cuda_overlap, choice.placement);
  if (backend.transport == TransportKind::kCe) {
    int missing = comms_->tp() > 1 && backend_->transport().find("copy-engine") != 0 ? 1 : 0;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, &missing, 1, MPI_INT, MPI_MAX, comms_->world()),
              "MPI_Allreduce(copy engines reach every peer)");
    if (missing != 0) {
      backend_.reset();
      throw BackendRuleError(
          "transport = ce: the copy engines do not reach every tensor-parallel peer (a TP group "
          "spans hosts, or CUDA IPC is not allowed between its ranks); transport = auto uses "
          "NCCL for those peers");
    }
  }
}

Context::~Context() = default;

int64_t Context::fsdp_ring_bytes() const { return fsdp_ring_->bytes(); }
int64_t Context::fsdp_reorder_bytes() const { return fsdp_reorder_->bytes(); }

}  // namespace cgemm
