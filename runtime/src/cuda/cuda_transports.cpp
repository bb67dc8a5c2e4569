// The CUDA backend's transports (see cuda_transports.hpp), each made by the transport table's
// make_transport (transport_table.hpp).

#include "cuda_transports.hpp"

#include <utility>

#include "cgemm/collective/group_agreement.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"
#include "transport_table.hpp"
#ifdef CGEMM_HAVE_UCX
#include "cgemm/collective/ucx_transport.hpp"  // ucx_reach_problem
#endif

namespace cgemm {

std::vector<Transport*> CudaTransports::offered() const {
  if (ucx) return {ucx.get()};
  std::vector<Transport*> out;
  for (Transport* t : {static_cast<Transport*>(ce.get()), static_cast<Transport*>(nccl.get())}) {
    if (t != nullptr) out.push_back(t);
  }
  return out;
}

void CudaTransports::drain() const {
  if (ucx) ucx->drain();
}

std::string CudaTransports::describe() const {
  if (ucx) return "transport: " + ucx->name() + ": " + ucx->describe() + "\n";
  if (ce) return "transport: copy-engine (CUDA IPC): " + ce->describe() + "\n";
  if (nccl) return "transport: nccl send/recv (copy engines not used: " + ce_why_not + ")\n";
  return "transport: none (" + ce_why_not + ")\n";
}

void CudaTransports::check_async_error() const {
  if (nccl) nccl->check_async_error();
}

namespace {

// The site of the group g of `comms`, for the table's rows.
TransportSite site_of(const MeshComms& comms, Group g, std::string where) {
  return {.backend = BackendKind::kCuda,
          .comm = comms.comm(g),
          .where = std::move(where),
          .describe_peer = [&comms, g](int m) {
            return comms.describe_rank(comms.world_rank_of(g, m));
          }};
}

// transport = ucx: UCX for every peer, or an error on every rank of the TP group alike.
std::unique_ptr<Transport> make_ucx(const MeshComms& comms, const std::string& where) {
  std::string why;
#ifdef CGEMM_HAVE_UCX
  std::unique_ptr<Transport> t;
  {
    const watchdog::WaitScope wait("the TP group's UCX setup (contexts, workers, addresses; " +
                                   where + ")");
    t = make_transport(TransportKind::kUcx, site_of(comms, Group::kTp, where + ", ucx transport"),
                       why);
  }
  if (!t) {
    throw Error(where + ": transport = ucx: no UCX transport on every rank of the TP group " +
                comms.describe_tp_group() + ": " + why);
  }
  // can_connect is the same on both sides of a pair; every rank learns whether any failed. why:
  // create()'s word on the first peer it cannot reach.
  const std::string mine = ucx_reach_problem(*t, comms, why);
  if (!detail::agree_on_problems(comms.tp_comm(), comms.tp(), mine, why,
                                 "MPI_Allgather(UCX reaches every peer)")) {
    throw Error(where + ": transport = ucx: " + why);
  }
  return t;
#else
  static_cast<void>(comms);
  why = "this cgemm was built without UCX";
  throw Error(where + ": transport = ucx: " + why);
#endif
}

}  // namespace

CudaTransports make_cuda_transports(const MeshComms& comms, Group g, bool use_ce, bool gpu_sharing,
                                    ncclComm_t borrowed_nccl, bool ucx, const std::string& where) {
  const MPI_Comm comm = comms.comm(g);  // a borrowed NCCL communicator's group
  const int size = comms.size(g);
  CudaTransports t;
  // gpu_sharing is the job's, the same on every rank: refused alike.
  if (gpu_sharing && borrowed_nccl != nullptr) {
    throw Error(where +
                ": a borrowed NCCL communicator cannot be used while ranks share a GPU "
                "(gpu_sharing: NCCL refuses two ranks of one communicator on one GPU)");
  }
  if (g != Group::kTp && (borrowed_nccl != nullptr || ucx)) {
    throw Error(where +
                ": a borrowed NCCL communicator and transport = ucx serve the TP group "
                "only");
  }
  if (borrowed_nccl != nullptr) {
    t.nccl = std::make_unique<NcclTransport>(comm, borrowed_nccl, where);
  } else if (!gpu_sharing) {
    // make_transport makes an NcclTransport for kNccl (or throws): the collectives need its type.
    std::string why;
    std::unique_ptr<Transport> made =
        make_transport(TransportKind::kNccl, site_of(comms, g, where), why);
    if (!made) throw Error(where + ": transport = nccl: " + why);
    t.nccl.reset(static_cast<NcclTransport*>(made.release()));
  }
  if (ucx && size > 1) {
    t.ce_why_not = "transport = ucx";
    t.ucx = make_ucx(comms, where);
    return t;
  }
  if (size == 1) {
    t.ce_why_not = std::string(group_name(g)) + " = 1: nothing to move";
  } else if (!use_ce) {
    t.ce_why_not = "use_ce = false";
  } else if (!comms.on_one_node(g)) {
    t.ce_why_not = "the " + std::string(group_name(g)) + " group spans nodes";
  } else {
    t.ce = make_transport(TransportKind::kCe, site_of(comms, g, where), t.ce_why_not);
  }
  if (gpu_sharing && size > 1 && !t.ce) {
    // create() answers alike on every TP rank, so every rank fails here, none waits.
    throw Error(where +
                ": gpu_sharing needs the copy-engine transport (NCCL refuses two ranks of one "
                "communicator on one GPU), and it cannot be used: " +
                t.ce_why_not);
  }
  return t;
}

}  // namespace cgemm
