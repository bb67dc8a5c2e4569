#pragma once
// The transport table: one row per choice of the `transport` option (options.hpp's
// TransportKind), saying which backends have it and what it gives a group (offer: plain facts,
// no MPI, so the dry run asks the same questions as a job), and beside it how each kind is made
// for a group (make_transport, in its own file so that what reads only the rows links no
// transport library).
// Context (its refusals), both backends (the CPU backend makes its transports with
// make_transport; the CUDA backend's transport set, cuda/cuda_transports.cpp, composes those it
// makes with it) and
// the dry run (predict_transport) all read these rows, so each rule is written once. What a made
// transport can reach is still asked of it (Transport::can_connect), since only it can tell,
// e.g., whether CUDA IPC is allowed. A new transport is its class in collective/, a
// TransportKind (options.hpp), a row here and a case in make_transport.

#include <mpi.h>

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "cgemm/collective/transport.hpp"
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

/// Where a row's make builds a transport: one group of one backend.
struct TransportSite {
  BackendKind backend = BackendKind::kCpu;        // kCpu or kCuda (a backend the row serves)
  MPI_Comm comm = MPI_COMM_NULL;                  // the group's communicator
  std::string where;                              // prefixes the transport's errors and waits
  std::function<std::string(int)> describe_peer;  // a rank of the group: "world rank R (host H)"
};

struct TransportRow {
  TransportKind kind = TransportKind::kAuto;
  bool cpu = false, cuda = false;  // the backends that have it
  /// For a group of a backend that has it.
  TransportOffer (*offer)(const GroupView& group) = nullptr;
};

/// Makes `kind`'s transport for a group (transport_make.cpp, one case per kind: a kind without
/// one does not compile). Collective over site.comm: every rank of the group makes the same
/// kind. The transport, or null with `why_not` set, alike on every rank of the group, where it
/// cannot serve it (e.g. no CUDA IPC between the ranks, a build without UCX). Throws
/// cgemm::Error for a failure that is not a refusal (e.g. NCCL's) and for kAuto (a rule, not a
/// transport).
std::unique_ptr<Transport> make_transport(TransportKind kind, const TransportSite& site,
                                          std::string& why_not);

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
