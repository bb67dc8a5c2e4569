#pragma once
// The transport table: one row per choice of the `transport` option (options.hpp's
// TransportKind), saying which backends have it and what it gives a tensor-parallel group.
// Context (its refusals), the CPU backend (its refusal of the CUDA-only kinds) and the dry run
// (predict_transport, which sees no MPI and no GPU) all read these rows, so each rule is written
// once. The transports themselves are made by the backends (cpu_backend.cpp,
// collective/cuda_transports.hpp); what a made transport can reach is still asked of it
// (Transport::can_connect), since only it can tell, e.g., whether CUDA IPC is allowed.

#include <span>
#include <string>

#include "cgemm/runtime/options.hpp"

namespace cgemm {

/// What the rows see of a tensor-parallel group: plain facts, no MPI, so a dry run asks the
/// same questions as a job.
struct GroupView {
  BackendKind backend = BackendKind::kCpu;  // kCpu or kCuda
  int size = 1;                             // ranks in the group (tp)
  bool on_one_host = true;                  // every rank of the group on one host
  bool use_ce = true;                       // OverlapOptions::use_ce
};

/// What a group gets from a row: the transport's name (Transport::name() of what the backend
/// makes: "mpi", "nccl", "copy-engine (CUDA IPC)", ...; "none (tp = 1)" where no peer needs
/// one), or why the row cannot serve it.
struct TransportOffer {
  std::string name;     // set when served
  std::string refusal;  // set when not: one clause, e.g. "transport = ce with use_ce = off"
  bool served() const { return refusal.empty(); }
};

struct TransportRow {
  TransportKind kind = TransportKind::kAuto;
  bool cpu = false, cuda = false;  // the backends that have it
  /// For a group of a backend that has it.
  TransportOffer (*offer)(const GroupView& group) = nullptr;
};

/// The rows, one per TransportKind but kAuto, in the order the option lists them.
std::span<const TransportRow> transport_rows();

/// What `kind` gives `group`: kAuto's rule (the CPU backend: MPI; the CUDA backend: the copy
/// engines where the group is on one host and use_ce, else NCCL), or the row's offer, or the
/// refusal of a backend that has not the kind ("transport = nccl needs the CUDA backend; the
/// CPU backend has mpi and ucx"), written from the rows.
TransportOffer offer_transport(TransportKind kind, const GroupView& group);

/// "" when `backend` has `kind` (kAuto: always), else the refusal above.
std::string transport_backend_refusal(TransportKind kind, BackendKind backend);

}  // namespace cgemm
