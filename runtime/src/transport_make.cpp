// The transport table's make (transport_table.hpp): each kind's transport made for one group.
// Apart from the rows (transport_table.cpp) so that what reads only the rows (the dry run,
// cgemm-compare through the launcher's options) does not link NCCL, CUDA or UCX.

#include <memory>
#include <string>

#include "cgemm/collective/mpi_transport.hpp"
#include "cgemm/core/error.hpp"
#include "transport_table.hpp"
#ifdef CGEMM_HAVE_UCX
#include "cgemm/collective/ucx_transport.hpp"
#endif
#ifdef CGEMM_HAVE_CUDA
#include "cgemm/collective/ce_transport.hpp"
#include "cgemm/collective/nccl_transport.hpp"
#ifdef CGEMM_HAVE_UCX
#include "cgemm/collective/ucx_staged_transport.hpp"
#endif
#endif

namespace cgemm {

namespace {

std::unique_ptr<Transport> make_mpi(const TransportSite& s) {
  return std::make_unique<MpiTransport>(s.comm);
}

// UCX puts on the CPU backend; on the CUDA backend staged through pinned host memory.
std::unique_ptr<Transport> make_ucx(const TransportSite& s, std::string& why_not) {
#ifdef CGEMM_HAVE_UCX
#ifdef CGEMM_HAVE_CUDA
  if (s.backend == BackendKind::kCuda) {
    return make_ucx_staged_transport(s.comm, s.where, s.describe_peer, why_not);
  }
#endif
  return UcxTransport::create(s.comm, s.where, s.describe_peer, why_not);
#else
  static_cast<void>(s);
  why_not =
      "this cgemm was built without UCX (configure found no ucx.pc: install libucx-dev, then "
      "configure and build again)";
  return nullptr;
#endif
}

std::unique_ptr<Transport> make_nccl(const TransportSite& s, std::string& why_not) {
#ifdef CGEMM_HAVE_CUDA
  static_cast<void>(why_not);
  return std::make_unique<NcclTransport>(s.comm, s.where);
#else
  static_cast<void>(s);
  why_not = "this cgemm was built without CUDA";
  return nullptr;
#endif
}

std::unique_ptr<Transport> make_ce(const TransportSite& s, std::string& why_not) {
#ifdef CGEMM_HAVE_CUDA
  return CeTransport::create(s.comm, s.where, why_not);
#else
  static_cast<void>(s);
  why_not = "this cgemm was built without CUDA";
  return nullptr;
#endif
}

}  // namespace

std::unique_ptr<Transport> make_transport(TransportKind kind, const TransportSite& site,
                                          std::string& why_not) {
  // One case per kind and no default: a kind added without its make does not compile (-Wswitch).
  switch (kind) {
    case TransportKind::kMpi:
      return make_mpi(site);
    case TransportKind::kUcx:
      return make_ucx(site, why_not);
    case TransportKind::kNccl:
      return make_nccl(site, why_not);
    case TransportKind::kCe:
      return make_ce(site, why_not);
    case TransportKind::kAuto:
      break;
  }
  throw Error("transport = " + transport_kind_name(kind) +
              " is a rule, not a transport: make one of the kinds it picks");
}

}  // namespace cgemm
