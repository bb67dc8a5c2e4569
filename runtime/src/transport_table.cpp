// The transport table (transport_table.hpp).

#include "transport_table.hpp"

#include <array>
#include <utility>
#include <vector>

namespace cgemm {

namespace {

constexpr const char* kNone = "none (tp = 1)";

TransportOffer named(std::string name) { return {std::move(name), ""}; }
TransportOffer refused(std::string why) { return {"", std::move(why)}; }

TransportOffer offer_mpi(const GroupView&) { return named("mpi"); }

TransportOffer offer_ucx(const GroupView& g) {
#ifndef CGEMM_HAVE_UCX
  // As the backends' UCX set-up: a build without UCX refuses ucx at any tp.
  static_cast<void>(g);
  return refused("transport = ucx: this cgemm was built without UCX");
#else
  // A group of one rank has no peer: the CPU backend keeps its MPI transport then.
  if (g.backend == BackendKind::kCpu) return named(g.size <= 1 ? "mpi" : "ucx");
  return named(g.size <= 1 ? kNone : "ucx (staged through pinned host memory)");
#endif
}

TransportOffer offer_nccl(const GroupView& g) { return named(g.size <= 1 ? kNone : "nccl"); }

TransportOffer offer_ce(const GroupView& g) {
  if (g.size <= 1) return named(kNone);
  if (!g.use_ce) return refused("transport = ce with use_ce = off");
  if (!g.on_one_host) return refused("transport = ce, and the TP group spans hosts");
  return named("copy-engine (CUDA IPC)");
}

constexpr std::array<TransportRow, 4> kRows{{
    {TransportKind::kMpi, true, false, offer_mpi},
    {TransportKind::kUcx, true, true, offer_ucx},
    {TransportKind::kNccl, false, true, offer_nccl},
    {TransportKind::kCe, false, true, offer_ce},
}};

bool has(const TransportRow& r, BackendKind b) { return b == BackendKind::kCpu ? r.cpu : r.cuda; }

// "mpi and ucx": the kinds `backend` has, in the rows' order.
std::string kinds_of(BackendKind backend) {
  std::vector<std::string> names;
  for (const TransportRow& r : kRows) {
    if (has(r, backend)) names.push_back(transport_kind_name(r.kind));
  }
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    s += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return s;
}

const char* backend_title(BackendKind b) { return b == BackendKind::kCpu ? "CPU" : "CUDA"; }

}  // namespace

std::span<const TransportRow> transport_rows() { return kRows; }

std::string transport_backend_refusal(TransportKind kind, BackendKind backend) {
  if (kind == TransportKind::kAuto) return "";
  for (const TransportRow& r : kRows) {
    if (r.kind != kind || has(r, backend)) continue;
    const BackendKind other = backend == BackendKind::kCpu ? BackendKind::kCuda : BackendKind::kCpu;
    return "transport = " + transport_kind_name(kind) + " needs the " + backend_title(other) +
           " backend; the " + backend_title(backend) + " backend has " + kinds_of(backend);
  }
  return "";
}

TransportOffer offer_transport(TransportKind kind, const GroupView& group) {
  if (kind == TransportKind::kAuto) {
    if (group.backend == BackendKind::kCpu) return named("mpi");
    if (group.size <= 1) return named(kNone);
    return named(group.on_one_host && group.use_ce ? "copy-engine (CUDA IPC)" : "nccl");
  }
  if (std::string why = transport_backend_refusal(kind, group.backend); !why.empty()) {
    return refused(std::move(why));
  }
  for (const TransportRow& r : kRows) {
    if (r.kind == kind) return r.offer(group);
  }
  return refused("transport = " + transport_kind_name(kind) + " has no row in the table");
}

}  // namespace cgemm
