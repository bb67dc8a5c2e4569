#include "cgemm/collective/mpi_transport.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/error.hpp"

namespace cgemm {

namespace {
// MPI counts are int: split big messages into pieces of at most 1 GiB.
constexpr size_t kMaxPiece = size_t{1} << 30;
// Tags cycle in a range well below MPI_TAG_UB's guaranteed minimum (32767).
constexpr int kTagRange = 16384;
}  // namespace

MpiTransport::MpiTransport(MPI_Comm tp_comm) : comm_(tp_comm) {
  check_mpi(MPI_Comm_rank(tp_comm, &rank_), "MPI_Comm_rank(tp)");
  check_mpi(MPI_Comm_size(tp_comm, &size_), "MPI_Comm_size(tp)");
}

int64_t MpiTransport::start(std::span<const Exchange> group, void*) {
  Pending p{next_handle_++, {}};
  for (const Exchange& x : group) {
    // Both sides post exchanges in the same order, so the same counter gives matching tags.
    const int tag = tag_;
    tag_ = (tag_ + 1) % kTagRange;
    char* dst = static_cast<char*>(x.dst->local) + x.recv_offset;
    for (size_t off = 0; off < x.bytes; off += kMaxPiece) {
      const int n = static_cast<int>(std::min(kMaxPiece, x.bytes - off));
      MPI_Request r;
      check_mpi(MPI_Irecv(dst + off, n, MPI_BYTE, x.recv_peer, tag, comm_, &r), "MPI_Irecv");
      p.requests.push_back(r);
      check_mpi(MPI_Isend(static_cast<const char*>(x.src) + off, n, MPI_BYTE, x.send_peer, tag,
                          comm_, &r),
                "MPI_Isend");
      p.requests.push_back(r);
    }
  }
  pending_.push_back(std::move(p));
  return pending_.back().handle;
}

void MpiTransport::wait(int64_t handle) {
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](const Pending& p) { return p.handle == handle; });
  if (it == pending_.end()) {
    throw Error("MpiTransport::wait: unknown or already completed exchange " +
                std::to_string(handle));
  }
  check_mpi(
      MPI_Waitall(static_cast<int>(it->requests.size()), it->requests.data(), MPI_STATUSES_IGNORE),
      "MPI_Waitall");
  pending_.erase(it);
}

void MpiTransport::progress() {
  for (auto& p : pending_) {
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(p.requests.size()), p.requests.data(), &done,
                          MPI_STATUSES_IGNORE),
              "MPI_Testall");
  }
}

}  // namespace cgemm
