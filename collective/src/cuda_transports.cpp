// The CUDA backend's transports (see cuda_transports.hpp).

#include "cgemm/collective/cuda_transports.hpp"

#include "cgemm/core/error.hpp"

namespace cgemm {

std::vector<Transport*> CudaTransports::offered() const {
  std::vector<Transport*> out;
  for (Transport* t : {static_cast<Transport*>(ce.get()), static_cast<Transport*>(nccl.get())}) {
    if (t != nullptr) out.push_back(t);
  }
  return out;
}

std::string CudaTransports::describe() const {
  if (ce) return "transport: copy-engine (CUDA IPC): " + ce->describe() + "\n";
  if (nccl) return "transport: nccl send/recv (copy engines not used: " + ce_why_not + ")\n";
  return "transport: none (" + ce_why_not + ")\n";
}

void CudaTransports::check_async_error() const {
  if (nccl) nccl->check_async_error();
}

CudaTransports make_cuda_transports(const MeshComms& comms, bool use_ce, bool gpu_sharing,
                                    ncclComm_t borrowed_nccl, const std::string& where) {
  CudaTransports t;
  // gpu_sharing is the job's, the same on every rank: refused alike.
  if (gpu_sharing && borrowed_nccl != nullptr) {
    throw Error(where +
                ": a borrowed NCCL communicator cannot be used while ranks share a GPU "
                "(gpu_sharing: NCCL refuses two ranks of one communicator on one GPU)");
  }
  if (borrowed_nccl != nullptr) {
    t.nccl = std::make_unique<NcclTransport>(comms.tp_comm(), borrowed_nccl, where);
  } else if (!gpu_sharing) {
    t.nccl = std::make_unique<NcclTransport>(comms.tp_comm(), where);
  }
  if (comms.tp() == 1) {
    t.ce_why_not = "tp = 1: nothing to move";
  } else if (!use_ce) {
    t.ce_why_not = "use_ce = false";
  } else if (!comms.tp_group_on_one_node()) {
    t.ce_why_not = "the TP group spans nodes";
  } else {
    t.ce = CeTransport::create(comms.tp_comm(), where, t.ce_why_not);
  }
  if (gpu_sharing && comms.tp() > 1 && !t.ce) {
    // create() answers alike on every TP rank, so every rank fails here, none waits.
    throw Error(where +
                ": gpu_sharing needs the copy-engine transport (NCCL refuses two ranks of one "
                "communicator on one GPU), and it cannot be used: " +
                t.ce_why_not);
  }
  return t;
}

}  // namespace cgemm
