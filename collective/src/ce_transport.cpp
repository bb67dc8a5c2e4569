#include "cgemm/collective/ce_transport.hpp"

#include <algorithm>

#include "cgemm/collective/group_agreement.hpp"
#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cuda_driver.hpp"

namespace cgemm {
namespace {

using detail::cuda_problem;

using detail::check_cu;
using detail::cuda_driver;

CUdeviceptr dptr(const void* p) { return detail::device_address(p); }

// The group's one decision (group_agreement.hpp).
bool agree(MPI_Comm comm, int size, const std::string& mine, std::string& why) {
  return detail::agree_on_problems(comm, size, mine, why, "MPI_Allgather(copy-engine checks)");
}

// Exchanges one IPC handle per rank and opens the peers'. Returns the peer pointers (own
// pointer at index rank) or a problem description.
std::string open_peers(MPI_Comm comm, int rank, int size, void* local, size_t bytes,
                       std::vector<void*>& peers) {
  struct Entry {
    cudaIpcMemHandle_t handle;
    uint64_t bytes;
    int32_t ok;
  };
  Entry mine{};
  std::string problem;
  const cudaError_t rc = cudaIpcGetMemHandle(&mine.handle, local);
  mine.ok = rc == cudaSuccess ? 1 : 0;
  mine.bytes = bytes;
  if (rc != cudaSuccess) problem = cuda_problem(rc, "cudaIpcGetMemHandle");
  std::vector<Entry> all(static_cast<size_t>(size));
  check_mpi(MPI_Allgather(&mine, static_cast<int>(sizeof(Entry)), MPI_BYTE, all.data(),
                          static_cast<int>(sizeof(Entry)), MPI_BYTE, comm),
            "MPI_Allgather(IPC handles)");
  peers.assign(static_cast<size_t>(size), nullptr);
  peers[static_cast<size_t>(rank)] = local;
  for (int r = 0; r < size && problem.empty(); ++r) {
    const Entry& e = all[static_cast<size_t>(r)];
    if (r == rank) continue;
    if (e.ok == 0) {
      problem = "tp rank " + std::to_string(r) + " has no IPC handle";
    } else if (e.bytes != bytes) {
      problem = "buffer of " + std::to_string(bytes) + " bytes here but " +
                std::to_string(e.bytes) + " on tp rank " + std::to_string(r) +
                " (symmetric buffers must have the same size on every rank)";
    } else {
      void* p = nullptr;
      const cudaError_t orc = cudaIpcOpenMemHandle(&p, e.handle, cudaIpcMemLazyEnablePeerAccess);
      if (orc != cudaSuccess) {
        problem = cuda_problem(orc, "cudaIpcOpenMemHandle(tp rank " + std::to_string(r) + ")");
      } else {
        peers[static_cast<size_t>(r)] = p;
      }
    }
  }
  if (!problem.empty()) {
    static_cast<void>(cudaGetLastError());  // the failure is reported; leave no stale error
    for (int r = 0; r < size; ++r) {
      if (r != rank && peers[static_cast<size_t>(r)] != nullptr) {
        cudaIpcCloseMemHandle(peers[static_cast<size_t>(r)]);
      }
    }
    peers.clear();
  }
  return problem;
}

}  // namespace

std::unique_ptr<CeTransport> CeTransport::create(MPI_Comm tp_comm, std::string where,
                                                 std::string& why_not) {
  std::unique_ptr<CeTransport> t(new CeTransport());
  t->comm_ = tp_comm;
  t->where_ = std::move(where);
  check_mpi(MPI_Comm_rank(tp_comm, &t->rank_), "MPI_Comm_rank(tp)");
  check_mpi(MPI_Comm_size(tp_comm, &t->size_), "MPI_Comm_size(tp)");

  // 1. Local capabilities: driver entry points and 64-bit stream memory operations.
  std::string problem = detail::stream_memops_problem(&t->flush_);
  if (!agree(tp_comm, t->size_, problem, why_not)) return nullptr;

  // 2. The flags: zeroed and settled before any peer can see them (the Allgather inside
  // open_peers happens after every rank's cudaDeviceSynchronize here).
  const size_t flag_bytes = sizeof(uint64_t) * 2 * static_cast<size_t>(t->size_);
  void* flags = nullptr;
  if (const cudaError_t rc = cudaMalloc(&flags, flag_bytes); rc != cudaSuccess) {
    problem = cuda_problem(rc, "cudaMalloc(" + std::to_string(flag_bytes) + " bytes of flags)");
    flags = nullptr;
  } else if (const cudaError_t mrc = cudaMemset(flags, 0, flag_bytes); mrc != cudaSuccess) {
    problem = cuda_problem(mrc, "cudaMemset(flags)");
  } else if (const cudaError_t src = cudaDeviceSynchronize(); src != cudaSuccess) {
    problem = cuda_problem(src, "cudaDeviceSynchronize");
  }
  t->flags_ = static_cast<uint64_t*>(flags);
  if (!problem.empty()) static_cast<void>(cudaGetLastError());
  if (!agree(tp_comm, t->size_, problem, why_not)) {
    t->release_flags();
    return nullptr;
  }
  std::vector<void*> peers;
  problem = open_peers(tp_comm, t->rank_, t->size_, flags, flag_bytes, peers);
  // From here on release_flags() closes whatever this rank opened.
  for (void* p : peers) t->peer_flags_.push_back(static_cast<uint64_t*>(p));
  if (!agree(tp_comm, t->size_, problem, why_not)) {
    t->release_flags();
    return nullptr;
  }
  return t;
}

void CeTransport::release_flags() noexcept {
  for (int r = 0; r < static_cast<int>(peer_flags_.size()); ++r) {
    if (r != rank_ && peer_flags_[static_cast<size_t>(r)] != nullptr) {
      cudaIpcCloseMemHandle(peer_flags_[static_cast<size_t>(r)]);
    }
  }
  peer_flags_.clear();
  if (flags_ != nullptr) cudaFree(flags_);
  flags_ = nullptr;
}

CeTransport::~CeTransport() {
  // Peers only write into this rank's memory in ways this rank's own streams wait for (see
  // the header), so once this device is idle nothing arrives any more.
  cudaDeviceSynchronize();
  while (!peers_.empty()) detach(SymmetricBuffer{nullptr, 0, peers_.begin()->first});
  release_flags();
}

void CeTransport::attach(const SymmetricBuffer& buf) {
  std::vector<void*> peers;
  const std::string problem =
      open_peers(comm_, rank_, size_, buf.local, std::max<size_t>(buf.bytes, 1), peers);
  std::string why;
  if (!agree(comm_, size_, problem, why)) {
    throw Error(where_ + ": cannot share a symmetric buffer of " + std::to_string(buf.bytes) +
                " bytes over CUDA IPC: " + why);
  }
  peers_[buf.id] = std::move(peers);
}

void CeTransport::detach(const SymmetricBuffer& buf) noexcept {
  auto it = peers_.find(buf.id);
  if (it == peers_.end()) return;
  for (int r = 0; r < static_cast<int>(it->second.size()); ++r) {
    if (r != rank_ && it->second[static_cast<size_t>(r)] != nullptr) {
      cudaIpcCloseMemHandle(it->second[static_cast<size_t>(r)]);
    }
  }
  peers_.erase(it);
}

int64_t CeTransport::start(std::span<const Exchange> group, void* stream_handle) {
  const detail::CudaDriver& d = cuda_driver();
  auto stream = static_cast<cudaStream_t>(stream_handle);
  std::vector<int> send_peers, recv_peers;
  std::vector<const std::vector<void*>*> mapped;
  for (const Exchange& x : group) {
    auto it = peers_.find(x.dst->id);
    if (it == peers_.end()) {
      throw Error(where_ + ": copy-engine exchange into symmetric buffer " +
                  std::to_string(x.dst->id) + ", which was never attached");
    }
    mapped.push_back(&it->second);
    if (std::find(send_peers.begin(), send_peers.end(), x.send_peer) == send_peers.end()) {
      send_peers.push_back(x.send_peer);
    }
    if (std::find(recv_peers.begin(), recv_peers.end(), x.recv_peer) == recv_peers.end()) {
      recv_peers.push_back(x.recv_peer);
    }
  }
  const std::string group_name = " (exchange group " + std::to_string(++seq_) + ")";
  // The protocol of ce_transport.hpp; the flags go back to 0, so nothing here is numbered.
  constexpr uint64_t kSet = 1, kClear = 0;
  const auto set_flag = [&](uint64_t* flag, const std::string& what) {
    check_cu(d.write_value64(stream, dptr(flag), kSet, CU_STREAM_WRITE_VALUE_DEFAULT),
             "cuStreamWriteValue64(" + what + ")" + group_name, where_);
  };
  const auto take_flag = [&](uint64_t* flag, unsigned wait_flags, const std::string& what) {
    check_cu(d.wait_value64(stream, dptr(flag), kSet, wait_flags),
             "cuStreamWaitValue64(" + what + ")" + group_name, where_);
    check_cu(d.write_value64(stream, dptr(flag), kClear, CU_STREAM_WRITE_VALUE_DEFAULT),
             "cuStreamWriteValue64(clear " + what + ")" + group_name, where_);
  };
  // 1. Tell each sender that this rank's slots may be written.
  for (int p : recv_peers) {
    set_flag(ready_slot(peer_flags_[static_cast<size_t>(p)], rank_),
             "ready flag of tp rank " + std::to_string(p));
  }
  // 2. Wait until each receiver said the same.
  for (int q : send_peers) {
    take_flag(ready_slot(flags_, q), CU_STREAM_WAIT_VALUE_GEQ,
              "ready flag from tp rank " + std::to_string(q));
  }
  // 3. Push.
  for (size_t i = 0; i < group.size(); ++i) {
    const Exchange& x = group[i];
    if (x.bytes == 0) continue;
    char* dst = static_cast<char*>((*mapped[i])[static_cast<size_t>(x.send_peer)]) + x.send_offset;
    check_cuda(cudaMemcpyAsync(dst, x.src, x.bytes, cudaMemcpyDeviceToDevice, stream),
               "cudaMemcpyAsync(" + std::to_string(x.bytes) + " bytes to tp rank " +
                   std::to_string(x.send_peer) + " at offset " + std::to_string(x.send_offset) +
                   ")" + group_name,
               where_);
  }
  // 4. Announce the data; the write's implicit fence orders it after the copies.
  for (int q : send_peers) {
    set_flag(data_slot(peer_flags_[static_cast<size_t>(q)], rank_),
             "data flag of tp rank " + std::to_string(q));
  }
  // 5. Wait for the data from every sender.
  const unsigned wait_flags = static_cast<unsigned>(CU_STREAM_WAIT_VALUE_GEQ) |
                              (flush_ ? static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH) : 0u);
  for (int p : recv_peers) {
    take_flag(data_slot(flags_, p), wait_flags, "data flag from tp rank " + std::to_string(p));
  }
  return -1;
}

std::string CeTransport::describe() const {
  return std::string("copy-engine pushes over CUDA IPC, stream memory operations for flags") +
         (flush_ ? ", remote-write flush on wait" : "");
}

}  // namespace cgemm
