#include "cgemm/collective/ucx_transport.hpp"

#include <sched.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "cgemm/collective/group_agreement.hpp"
#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"
#include "ucx_context.hpp"

namespace cgemm {
namespace {

using ucx::fence_is_strong;
using ucx::flag_ordering;
using ucx::make_context;
using ucx::status_text;

// The group's one decision (group_agreement.hpp).
bool agree(MPI_Comm comm, int size, const std::string& mine, std::string& why) {
  return detail::agree_on_problems(comm, size, mine, why, "MPI_Allgather(UCX checks)");
}

// Gathers a byte blob of any size from every rank of `comm` (MPI_Allgatherv).
std::vector<std::vector<char>> all_gather_blobs(MPI_Comm comm, int size, const void* mine,
                                                size_t bytes, const char* what) {
  const int len = static_cast<int>(bytes);
  std::vector<int> lens(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  check_mpi(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm), what);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::vector<char> all(static_cast<size_t>(std::max(total, 1)));
  check_mpi(
      MPI_Allgatherv(mine, len, MPI_BYTE, all.data(), lens.data(), offsets.data(), MPI_BYTE, comm),
      what);
  std::vector<std::vector<char>> out(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const char* p = all.data() + offsets[static_cast<size_t>(r)];
    out[static_cast<size_t>(r)].assign(p, p + lens[static_cast<size_t>(r)]);
  }
  return out;
}

}  // namespace

std::unique_ptr<UcxTransport> UcxTransport::create(MPI_Comm tp_comm, std::string where,
                                                   std::function<std::string(int)> describe_peer,
                                                   std::string& why_not, bool serialized) {
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  t->comm_ = tp_comm;
  t->where_ = std::move(where);
  t->describe_peer_ = std::move(describe_peer);
  check_mpi(MPI_Comm_rank(tp_comm, &t->rank_), "MPI_Comm_rank(tp)");
  check_mpi(MPI_Comm_size(tp_comm, &t->size_), "MPI_Comm_size(tp)");
  t->strong_fence_ = fence_is_strong();
  const size_t n = static_cast<size_t>(t->size_);

  // 1. Context and worker.
  std::string problem;
  if (const ucs_status_t s = make_context(&t->context_); s != UCS_OK) {
    t->context_ = nullptr;
    problem = "ucp_init failed: " + status_text(s);
  } else {
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // The CPU backend's thread alone, or (serialized) the staged transport's two threads, one
    // at a time.
    wp.thread_mode = serialized ? UCS_THREAD_MODE_SERIALIZED : UCS_THREAD_MODE_SINGLE;
    if (const ucs_status_t ws = ucp_worker_create(t->context_, &wp, &t->worker_); ws != UCS_OK) {
      t->worker_ = nullptr;
      problem = "ucp_worker_create failed: " + status_text(ws);
    }
  }
  if (!agree(tp_comm, t->size_, problem, why_not)) return nullptr;

  // 2. Worker addresses, then an endpoint to every peer.
  ucp_address_t* address = nullptr;
  size_t address_bytes = 0;
  if (const ucs_status_t s = ucp_worker_get_address(t->worker_, &address, &address_bytes);
      s != UCS_OK) {
    problem = "ucp_worker_get_address failed: " + status_text(s);
    address = nullptr;
    address_bytes = 0;
  }
  const auto addresses =
      all_gather_blobs(tp_comm, t->size_, address, address_bytes, "MPI_Allgatherv(UCX addresses)");
  if (address != nullptr) ucp_worker_release_address(t->worker_, address);
  if (!agree(tp_comm, t->size_, problem, why_not)) return nullptr;
  t->eps_.assign(n, nullptr);
  std::vector<std::string> ep_problem(n);
  std::vector<char> mine(n, 0);
  for (int r = 0; r < t->size_; ++r) {
    if (r == t->rank_) continue;
    const auto& a = addresses[static_cast<size_t>(r)];
    if (a.empty()) continue;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(a.data());
    ucp_ep_h h = nullptr;
    if (const ucs_status_t s = ucp_ep_create(t->worker_, &ep, &h); s != UCS_OK) {
      ep_problem[static_cast<size_t>(r)] = "ucp_ep_create failed: " + status_text(s);
    } else {
      t->eps_[static_cast<size_t>(r)] = h;
      mine[static_cast<size_t>(r)] = 1;
    }
  }
  // Reachable only where both sides made their endpoint: every rank learns every rank's row.
  std::vector<char> all(n * n);
  check_mpi(MPI_Allgather(mine.data(), t->size_, MPI_CHAR, all.data(), t->size_, MPI_CHAR, tp_comm),
            "MPI_Allgather(UCX endpoints)");
  t->reach_.assign(n, 0);
  for (size_t r = 0; r < n; ++r) {
    t->reach_[r] = static_cast<char>(r != static_cast<size_t>(t->rank_) && mine[r] != 0 &&
                                     all[r * n + static_cast<size_t>(t->rank_)] != 0);
  }
  // The first unreachable peer's reason goes to why_not at the end (create still succeeds:
  // can_connect decides per peer, and the caller names the peer).
  std::string unreachable;
  for (size_t r = 0; r < n && unreachable.empty(); ++r) {
    if (r != static_cast<size_t>(t->rank_) && t->reach_[r] == 0) {
      unreachable = ep_problem[r].empty() ? "its endpoint to this rank failed" : ep_problem[r];
    }
  }

  // 3. The flags, zeroed before any peer can know where they are.
  t->flags_ = new uint64_t[2 * n]();
  const SymmetricBuffer flags{t->flags_, sizeof(uint64_t) * 2 * n, -1};
  problem = t->problem_of_registration(flags, t->flag_region_);
  if (!agree(tp_comm, t->size_, problem, why_not)) {
    t.reset();
    return nullptr;
  }
  why_not = unreachable;
  return t;
}

std::string UcxTransport::problem_of_registration(const SymmetricBuffer& buf, Region& r) {
  std::string problem;
  void* packed = nullptr;
  size_t packed_bytes = 0;
  r.bytes = buf.bytes;
  if (buf.local == nullptr) {
    problem = "no buffer (its allocation failed)";
  } else {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = buf.local;
    mp.length = std::max<size_t>(buf.bytes, 1);
    ucp_mem_h mem = nullptr;
    if (const ucs_status_t s = ucp_mem_map(context_, &mp, &mem); s != UCS_OK) {
      problem = "ucp_mem_map(" + std::to_string(buf.bytes) + " bytes) failed: " + status_text(s);
    } else {
      r.mem = mem;
      if (const ucs_status_t ps = ucp_rkey_pack(context_, mem, &packed, &packed_bytes);
          ps != UCS_OK) {
        problem = "ucp_rkey_pack failed: " + status_text(ps);
        packed = nullptr;
        packed_bytes = 0;
      }
    }
  }
  exchange_keys(r, packed, packed_bytes, reinterpret_cast<uint64_t>(buf.local), problem);
  if (packed != nullptr) ucp_rkey_buffer_release(packed);
  if (!problem.empty()) release_region(r);
  return problem;
}

void UcxTransport::exchange_keys(Region& r, const void* packed, size_t packed_bytes, uint64_t base,
                                 std::string& problem) {
  const size_t n = static_cast<size_t>(size_);
  struct Entry {
    uint64_t addr;
    uint64_t bytes;
  };
  const Entry me{base, r.bytes};
  std::vector<Entry> entries(n);
  check_mpi(MPI_Allgather(&me, static_cast<int>(sizeof(Entry)), MPI_BYTE, entries.data(),
                          static_cast<int>(sizeof(Entry)), MPI_BYTE, comm_),
            "MPI_Allgather(UCX buffer addresses)");
  const auto keys =
      all_gather_blobs(comm_, size_, packed, packed_bytes, "MPI_Allgatherv(UCX remote keys)");
  r.addr.assign(n, 0);
  r.rkeys.assign(n, nullptr);
  for (size_t q = 0; q < n && problem.empty(); ++q) {
    r.addr[q] = entries[q].addr;
    if (q == static_cast<size_t>(rank_) || reach_[q] == 0) continue;
    if (keys[q].empty()) {
      problem = "tp rank " + std::to_string(q) + " has no remote key";
    } else if (entries[q].bytes != r.bytes) {
      problem = "buffer of " + std::to_string(r.bytes) + " bytes here but " +
                std::to_string(entries[q].bytes) + " on tp rank " + std::to_string(q) +
                " (symmetric buffers must have the same size on every rank)";
    } else if (const ucs_status_t s = ucp_ep_rkey_unpack(eps_[q], keys[q].data(), &r.rkeys[q]);
               s != UCS_OK) {
      r.rkeys[q] = nullptr;
      problem = "ucp_ep_rkey_unpack(tp rank " + std::to_string(q) + ") failed: " + status_text(s);
    }
  }
}

void UcxTransport::release_region(Region& r) noexcept {
  for (ucp_rkey* k : r.rkeys) {
    if (k != nullptr) ucp_rkey_destroy(k);
  }
  r.rkeys.clear();
  if (r.mem != nullptr) ucp_mem_unmap(context_, r.mem);
  r.mem = nullptr;
}

UcxTransport::~UcxTransport() {
  // Order: first let UCP finish (or give up on) every operation, while the buffers, the flag
  // values and the remote keys they use are still alive; then release the keys and regions;
  // then the worker and the context that own them.
  if (worker_ != nullptr) {
    // Every put was awaited by its receiver (see the header), unless an exception unwound past
    // a wait; UCP may also hold protocol messages of its own (acknowledgements, wireup) for a
    // peer. Flush them while the peers, in their own teardown, still progress, for at most a
    // second (a peer that is gone answers nothing, and nothing of cgemm's depends on it).
    ucp_request_param_t fp{};
    if (void* flush = ucp_worker_flush_nbx(worker_, &fp);
        flush != nullptr && !UCS_PTR_IS_ERR(flush)) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (ucp_request_check_status(flush) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < until) {
        ucp_worker_progress(worker_);
      }
      if (ucp_request_check_status(flush) == UCS_INPROGRESS) ucp_request_cancel(worker_, flush);
      ucp_request_free(flush);
    }
    // Closed in flush mode: UCP_EP_CLOSE_FLAG_FORCE is meant for endpoints created with
    // UCP_ERR_HANDLING_MODE_PEER, which these are not. Bounded like the flush: a close still in
    // progress after a second is left to ucp_worker_destroy, which destroys its endpoint.
    std::vector<void*> closing;
    ucp_request_param_t cp{};
    for (ucp_ep* ep : eps_) {
      if (ep == nullptr) continue;
      void* req = ucp_ep_close_nbx(ep, &cp);
      if (req != nullptr && !UCS_PTR_IS_ERR(req)) closing.push_back(req);
    }
    if (!closing.empty()) {
      const watchdog::WaitScope wait("UCX endpoints closing (" + where_ + ")");
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      for (void* req : closing) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS &&
               std::chrono::steady_clock::now() < until) {
          ucp_worker_progress(worker_);
        }
        ucp_request_free(req);  // one still in progress is released by UCP when it ends
      }
    }
    eps_.clear();
  }
  // Groups still in flight (an exception unwound past their wait): their puts were flushed or
  // ended with the endpoints above. Their requests go now; their flag values (in pending_)
  // only after the worker, in case a close timed out with a put still reading one.
  for (Pending& p : pending_) {
    for (void*& req : p.requests) {
      if (req != nullptr) ucp_request_free(req);
      req = nullptr;
    }
    for (void*& req : p.flushing) {
      if (req != nullptr) ucp_request_free(req);
      req = nullptr;
    }
  }
  for (auto& [id, r] : regions_) release_region(r);
  regions_.clear();
  release_region(flag_region_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  pending_.clear();
  if (context_ != nullptr) ucp_cleanup(context_);
  delete[] flags_;
}

bool UcxTransport::can_connect(int peer) const {
  return peer >= 0 && peer < size_ && peer != rank_ && reach_[static_cast<size_t>(peer)] != 0;
}

std::string UcxTransport::describe() const {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  return std::string("UCP puts into registered peer buffers, then a completion flag ordered by ") +
         flag_ordering(strong_fence_) + " (UCX " + std::to_string(major) + "." +
         std::to_string(minor) + "." + std::to_string(release) + ", host memory)";
}

std::string UcxTransport::peer_name(int peer) const {
  return (describe_peer_ ? describe_peer_(peer) + ", " : std::string()) + "tp rank " +
         std::to_string(peer);
}

void UcxTransport::attach(const SymmetricBuffer& buf) {
  Region r;
  std::string why;
  bool agreed = false;
  {
    // Both collectives under the watchdog: a peer that never reaches agree() stalls this rank
    // there as surely as in the key exchange.
    const watchdog::WaitScope wait("the TP group's UCX remote keys of symmetric buffer " +
                                   std::to_string(buf.id) + " (" + where_ + ")");
    const std::string problem = problem_of_registration(buf, r);
    agreed = agree(comm_, size_, problem, why);
  }
  if (!agreed) {
    release_region(r);  // registered here when only another rank failed
    throw Error(where_ + ": cannot register a symmetric buffer of " + std::to_string(buf.bytes) +
                " bytes with UCX: " + why);
  }
  regions_[buf.id] = std::move(r);
}

void UcxTransport::detach(const SymmetricBuffer& buf) noexcept {
  auto it = regions_.find(buf.id);
  if (it == regions_.end()) return;
  release_region(it->second);
  regions_.erase(it);
}

uint64_t UcxTransport::flag(size_t index) const {
  // Written by a peer's put (inside this thread's progress, or by a shared-memory transport);
  // read as an atomic so the compiler reloads it on every spin.
  return std::atomic_ref<uint64_t>(flags_[index]).load(std::memory_order_acquire);
}

void UcxTransport::put(Pending& p, const void* src, size_t bytes, int peer, uint64_t remote_addr,
                       ucp_rkey* rkey, const char* what) {
  ucp_request_param_t rp{};
  void* req = ucp_put_nbx(eps_[static_cast<size_t>(peer)], src, bytes, remote_addr, rkey, &rp);
  if (UCS_PTR_IS_ERR(req)) {
    throw Error(where_ + ": ucp_put_nbx(" + what + ", " + std::to_string(bytes) + " bytes to " +
                peer_name(peer) + ", exchange group " + std::to_string(p.seq) +
                ") failed: " + status_text(UCS_PTR_STATUS(req)));
  }
  if (req != nullptr) p.requests.push_back(req);
}

int64_t UcxTransport::start(std::span<const Exchange> group, void*) {
  for (const Exchange& x : group) {
    if (regions_.find(x.dst->id) == regions_.end()) {
      throw Error(where_ + ": exchange '" + (x.label != nullptr ? x.label : "unnamed") +
                  "' names symmetric buffer " + std::to_string(x.dst->id) +
                  ", which is not attached to the UCX transport");
    }
  }
  // The group is stored before its first put, so that a put that throws leaves every issued
  // request and its source (p.value) in pending_, where the destructor flushes them before
  // freeing anything.
  Pending& p = pending_.emplace_back();
  p.handle = next_handle_++;
  p.seq = ++seq_;
  p.value = std::make_unique<uint64_t>(p.seq);
  for (const Exchange& x : group) {
    p.sends.push_back(x);
    p.dst_ids.push_back(x.dst->id);
    if (std::find(p.send_peers.begin(), p.send_peers.end(), x.send_peer) == p.send_peers.end()) {
      p.send_peers.push_back(x.send_peer);
    }
    if (std::find(p.recv_peers.begin(), p.recv_peers.end(), x.recv_peer) == p.recv_peers.end()) {
      p.recv_peers.push_back(x.recv_peer);
    }
    p.labels += (p.labels.empty() ? "" : " + ") + std::string(x.label ? x.label : "unnamed");
  }
  p.pushed.assign(p.send_peers.size(), false);
  p.flushing.assign(p.send_peers.size(), nullptr);
  // 1. Tell each sender that this rank's slots for group s may be written.
  for (int q : p.recv_peers) {
    const uint64_t at = flag_region_.addr[static_cast<size_t>(q)] +
                        sizeof(uint64_t) * static_cast<size_t>(rank_);  // q's ready[me]
    put(p, p.value.get(), sizeof(uint64_t), q, at, flag_region_.rkeys[static_cast<size_t>(q)],
        "ready flag");
  }
  const int64_t handle = p.handle;
  progress();
  return handle;
}

bool UcxTransport::complete(Pending& p) {
  if (std::find(p.pushed.begin(), p.pushed.end(), false) != p.pushed.end()) return false;
  for (void*& req : p.requests) {
    if (req == nullptr) continue;
    const ucs_status_t s = ucp_request_check_status(req);
    if (s == UCS_INPROGRESS) return false;
    ucp_request_free(req);
    req = nullptr;
    if (s != UCS_OK) {
      throw Error(where_ + ": a UCX put of exchange group " + std::to_string(p.seq) + " ('" +
                  p.labels + "') failed: " + status_text(s));
    }
  }
  for (int q : p.recv_peers) {
    if (flag(static_cast<size_t>(size_ + q)) < p.seq) return false;
  }
  return true;
}

void UcxTransport::advance() {
  const size_t n = static_cast<size_t>(size_);
  // 2. Push in group order: a later group's chunks only after every earlier group's.
  for (Pending& p : pending_) {
    bool all_pushed = true;
    for (size_t k = 0; k < p.send_peers.size(); ++k) {
      if (p.pushed[k]) continue;
      const int q = p.send_peers[k];
      const auto put_flag = [&] {
        const uint64_t at = flag_region_.addr[static_cast<size_t>(q)] +
                            sizeof(uint64_t) * (n + static_cast<size_t>(rank_));  // q's data[me]
        put(p, p.value.get(), sizeof(uint64_t), q, at, flag_region_.rkeys[static_cast<size_t>(q)],
            "data flag");
        p.pushed[k] = true;
      };
      if (void*& f = p.flushing[k]; f != nullptr) {  // data issued, its flush in flight
        const ucs_status_t s = ucp_request_check_status(f);
        if (s == UCS_INPROGRESS) {
          all_pushed = false;
          continue;
        }
        ucp_request_free(f);
        f = nullptr;
        if (s != UCS_OK) {
          throw Error(where_ + ": ucp_ep_flush_nbx(to " + peer_name(q) + ", exchange group " +
                      std::to_string(p.seq) + ") failed: " + status_text(s));
        }
        put_flag();
        continue;
      }
      if (flag(static_cast<size_t>(q)) < p.seq) {  // q has not started group s yet
        all_pushed = false;
        continue;
      }
      for (size_t e = 0; e < p.sends.size(); ++e) {
        const Exchange& x = p.sends[e];
        if (x.send_peer != q || x.bytes == 0) continue;
        const Region& r = regions_.at(p.dst_ids[e]);
        put(p, x.src, x.bytes, q, r.addr[static_cast<size_t>(q)] + x.send_offset,
            r.rkeys[static_cast<size_t>(q)], x.label != nullptr ? x.label : "chunk");
      }
      // The data before the flag (see the header: which one depends on the UCX version).
      if (strong_fence_) {
        if (const ucs_status_t s = ucp_worker_fence(worker_); s != UCS_OK) {
          throw Error(where_ + ": ucp_worker_fence failed: " + status_text(s));
        }
        put_flag();
        continue;
      }
      ucp_request_param_t fp{};
      void* f = ucp_ep_flush_nbx(eps_[static_cast<size_t>(q)], &fp);
      if (UCS_PTR_IS_ERR(f)) {
        throw Error(where_ + ": ucp_ep_flush_nbx(to " + peer_name(q) + ", exchange group " +
                    std::to_string(p.seq) + ") failed: " + status_text(UCS_PTR_STATUS(f)));
      }
      if (f == nullptr) {  // flushed at once
        put_flag();
      } else {  // the flag goes when a later advance() finds the flush complete
        p.flushing[k] = f;
        all_pushed = false;
      }
    }
    if (!all_pushed) break;
  }
  // 3. Complete in group order (FIFO).
  for (Pending& p : pending_) {
    if (p.done) continue;
    if (!complete(p)) break;
    p.done = true;
  }
}

void UcxTransport::set_blocker(std::string what) {
  const std::lock_guard<std::mutex> lock(blocker_mutex_);
  blocker_ = std::move(what);
}

void UcxTransport::progress() {
  if (pending_.empty()) return;
  // Called between GEMM chunks, the only time a host transport moves data while the rank
  // computes: drain every event UCP has ready (TCP reads a socket a piece per call), pushing
  // what the flags it delivers make possible, before the next chunk.
  do {
    while (ucp_worker_progress(worker_) != 0) {
    }
    advance();
  } while (ucp_worker_progress(worker_) != 0);
}

std::string UcxTransport::waiting_for(int64_t target) const {
  for (const Pending& p : pending_) {
    if (p.done) continue;
    const std::string g =
        "exchange '" + p.labels + "' over UCX (group " + std::to_string(p.seq) + "): ";
    for (size_t k = 0; k < p.send_peers.size(); ++k) {
      const int q = p.send_peers[k];
      if (!p.pushed[k] && flag(static_cast<size_t>(q)) < p.seq) {
        return g + "ready flag from " + peer_name(q) + ", which has not started the group";
      }
    }
    for (int q : p.recv_peers) {
      if (flag(static_cast<size_t>(size_ + q)) < p.seq) return g + "data from " + peer_name(q);
    }
    if (p.handle == target) return g + "local completion of its puts";
  }
  return "UCX progress";
}

std::deque<UcxTransport::Pending>::iterator UcxTransport::find_pending(int64_t handle,
                                                                       const char* caller) {
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [&](const Pending& p) { return p.handle == handle; });
  if (it == pending_.end()) {
    throw Error(std::string("UcxTransport::") + caller +
                ": unknown or already completed exchange " + std::to_string(handle));
  }
  return it;
}

bool UcxTransport::test(int64_t handle) {
  auto it = find_pending(handle, "test");
  if (!it->done) {
    ucp_worker_progress(worker_);
    advance();
  }
  if (!it->done) return false;
  pending_.erase(it);
  return true;
}

void UcxTransport::wait(int64_t handle) {
  auto it = find_pending(handle, "wait");
  // What this rank waits for, kept up to date as it changes, for the watchdog's line.
  const auto blocking = [&] { return waiting_for(handle); };
  set_blocker(blocking());
  const watchdog::WaitScope wait([this] {
    const std::lock_guard<std::mutex> lock(blocker_mutex_);
    return blocker_ + " (" + where_ + ")";
  });
  // After a run of empty progress calls the CPU goes to the others: with more ranks than cores
  // (4 ranks on 2 cores in the tests) a spinning rank would keep the peer it waits for off the
  // core for its whole time slice.
  constexpr int kIdleBeforeYield = 64;
  uint64_t spins = 0;
  int idle = 0;
  while (!it->done) {
    if (ucp_worker_progress(worker_) != 0) {
      idle = 0;
    } else if (++idle >= kIdleBeforeYield) {
      idle = 0;
      sched_yield();
    }
    advance();
    if ((++spins & 1023) == 0) set_blocker(blocking());
  }
  pending_.erase(it);
}

std::string ucx_reach_problem(const Transport& t, const MeshComms& comms,
                              const std::string& detail) {
  for (int p = 0; p < comms.tp(); ++p) {
    if (p != comms.tp_rank() && !t.can_connect(p)) {
      return comms.describe_rank(comms.world_rank()) + " cannot reach " +
             comms.describe_rank(comms.world_rank_of_tp(p)) + " over UCX" +
             (detail.empty() ? std::string() : " (" + detail + ")");
    }
  }
  return {};
}

}  // namespace cgemm
