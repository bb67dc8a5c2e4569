// UCX for the CUDA backend, device buffers staged through pinned host memory (see
// ucx_staged_transport.hpp).

#include "cgemm/collective/ucx_staged_transport.hpp"

#include <cuda_runtime_api.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/collective/ucx_transport.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cuda_driver.hpp"
#include "group_agreement.hpp"

namespace cgemm {
namespace {

// Chunks in the send staging start at this alignment (UCX and the copy engines like it).
constexpr size_t kStagingAlign = 256;

size_t align_up(size_t n) { return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

std::string cuda_problem(cudaError_t rc, const std::string& call) {
  return call + " failed: " + cudaGetErrorName(rc);
}

class UcxStagedTransport final : public Transport {
 public:
  UcxStagedTransport(std::unique_ptr<UcxTransport> ucx, uint64_t* gate, void* gate_on_device,
                     int device, std::string where);
  ~UcxStagedTransport() override;
  UcxStagedTransport(const UcxStagedTransport&) = delete;
  UcxStagedTransport& operator=(const UcxStagedTransport&) = delete;

  std::string name() const override { return "ucx (staged through pinned host memory)"; }
  std::string describe() const override {
    return "device chunks copied to pinned host memory on the communication stream, moved by " +
           ucx_->describe() +
           " from a proxy thread, copied back after the stream waits on that thread's "
           "completion flag";
  }
  bool can_connect(int peer) const override { return ucx_->can_connect(peer); }
  void attach(const SymmetricBuffer& buf) override;
  void detach(const SymmetricBuffer& buf) noexcept override;
  int64_t start(std::span<const Exchange> group, void* stream) override;
  void wait(int64_t) override {}  // a stream transport: the stream orders what follows
  void drain() override;

 private:
  struct Mirror {
    void* host = nullptr;
    SymmetricBuffer registered;  // {host, bytes, id}: what the UCX transport knows
  };
  struct Group {
    uint64_t seq = 0;
    cudaEvent_t staged = nullptr;  // step 1 done on the GPU
    std::vector<Exchange> host;    // the same exchanges from the staging into the mirrors
    std::string labels;
    int64_t ucx = -1;  // the UCX group's handle once started
  };

  void proxy_main();
  bool proxy_step();                  // under mu_; true when something moved
  std::string proxy_blocker() const;  // under mu_
  void ensure_staging(size_t bytes);
  bool staged(const Group& g) const;           // cudaEventQuery, errors thrown
  void fail(const std::string& why) noexcept;  // under mu_
  void open_gate(uint64_t value) noexcept {
    std::atomic_ref<uint64_t>(*gate_).store(value, std::memory_order_release);
  }

  std::unique_ptr<UcxTransport> ucx_;  // under mu_ (a serialized UCP worker)
  uint64_t* gate_ = nullptr;           // mapped pinned memory, as the host writes it
  void* gate_on_device_ = nullptr;     // the same, as the GPU reads it
  int device_ = 0;
  std::string where_;
  std::map<int, std::unique_ptr<Mirror>> mirrors_;  // by SymmetricBuffer::id; stable addresses
  void* staging_ = nullptr;                         // pinned
  size_t staging_bytes_ = 0;
  uint64_t seq_ = 0;

  std::mutex mu_;
  std::condition_variable work_;     // to the proxy: a group, or stop
  std::condition_variable drained_;  // from the proxy: groups_ empty, or failed
  std::deque<Group> groups_;         // started, not yet through the gate, in order
  std::vector<cudaEvent_t> free_events_;
  std::string failed_;             // why the transport refuses further groups
  bool failure_reported_ = false;  // drain() threw it
  bool stop_ = false;
  std::mutex blocker_mutex_;  // the watchdog's thread reads blocker_ on a timeout
  std::string blocker_;
  std::thread proxy_;
};

UcxStagedTransport::UcxStagedTransport(std::unique_ptr<UcxTransport> ucx, uint64_t* gate,
                                       void* gate_on_device, int device, std::string where)
    : ucx_(std::move(ucx)),
      gate_(gate),
      gate_on_device_(gate_on_device),
      device_(device),
      where_(std::move(where)),
      proxy_([this] { proxy_main(); }) {}

UcxStagedTransport::~UcxStagedTransport() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  proxy_.join();
  // The backend drained before its teardown; after a failure the gate is already open. Either
  // way nothing may wait on this host any more, so the device can be waited for.
  open_gate(std::numeric_limits<uint64_t>::max());
  cudaDeviceSynchronize();
  for (const Group& g : groups_) cudaEventDestroy(g.staged);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  while (!mirrors_.empty()) detach(mirrors_.begin()->second->registered);
  ucx_.reset();  // its flush and endpoint close, while the memory below is still there
  if (staging_ != nullptr) cudaFreeHost(staging_);
  cudaFreeHost(gate_);
}

void UcxStagedTransport::attach(const SymmetricBuffer& buf) {
  // A rank whose device allocation failed registers nothing, so that UCX's attach throws on
  // every rank alike; the same when this rank's mirror cannot be had.
  auto m = std::make_unique<Mirror>();
  if (buf.local != nullptr) {
    if (cudaHostAlloc(&m->host, std::max<size_t>(buf.bytes, 1), cudaHostAllocDefault) !=
        cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      m->host = nullptr;
    }
  }
  m->registered = SymmetricBuffer{m->host, buf.bytes, buf.id};
  try {
    // The backend drained first (no group in flight): the proxy is idle, and the collective
    // inside cannot wait on it.
    const std::lock_guard<std::mutex> lock(mu_);
    ucx_->attach(m->registered);
  } catch (...) {
    if (m->host != nullptr) cudaFreeHost(m->host);
    throw;
  }
  mirrors_[buf.id] = std::move(m);
}

void UcxStagedTransport::detach(const SymmetricBuffer& buf) noexcept {
  auto it = mirrors_.find(buf.id);
  if (it == mirrors_.end()) return;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    ucx_->detach(it->second->registered);
  }
  if (it->second->host != nullptr) cudaFreeHost(it->second->host);
  mirrors_.erase(it);
}

void UcxStagedTransport::ensure_staging(size_t bytes) {
  if (bytes <= staging_bytes_) return;
  // Groups in flight may still read the old area: all through first.
  drain();
  const size_t want = std::max(bytes, 2 * staging_bytes_);
  if (staging_ != nullptr) cudaFreeHost(staging_);
  staging_ = nullptr;
  staging_bytes_ = 0;
  check_cuda(cudaHostAlloc(&staging_, want, cudaHostAllocDefault),
             "cudaHostAlloc(" + std::to_string(want) + " bytes of UCX send staging)", where_);
  staging_bytes_ = want;
}

int64_t UcxStagedTransport::start(std::span<const Exchange> group, void* stream_handle) {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.empty()) {
      throw Error(where_ + ": the UCX transport failed earlier (" + failed_ +
                  "); no exchange can run on it any more");
    }
  }
  auto stream = static_cast<cudaStream_t>(stream_handle);
  size_t send_bytes = 0;
  for (const Exchange& x : group) {
    if (mirrors_.find(x.dst->id) == mirrors_.end()) {
      throw Error(where_ + ": exchange '" + (x.label != nullptr ? x.label : "unnamed") +
                  "' names symmetric buffer " + std::to_string(x.dst->id) +
                  ", which is not attached to the UCX transport");
    }
    send_bytes += align_up(x.bytes);
  }
  ensure_staging(send_bytes);

  Group g;
  g.seq = ++seq_;
  const std::string name = " (UCX exchange group " + std::to_string(g.seq) + ")";
  // 1. The chunks this rank sends, to the staging.
  size_t off = 0;
  for (const Exchange& x : group) {
    Exchange h = x;
    h.src = static_cast<char*>(staging_) + off;
    h.dst = &mirrors_.at(x.dst->id)->registered;
    if (x.bytes > 0) {
      check_cuda(
          cudaMemcpyAsync(static_cast<char*>(staging_) + off, x.src, x.bytes,
                          cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync(" + std::to_string(x.bytes) + " bytes to the send staging)" + name,
          where_);
    }
    off += align_up(x.bytes);
    g.host.push_back(h);
    g.labels += (g.labels.empty() ? "" : " + ") + std::string(x.label ? x.label : "unnamed");
  }
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!free_events_.empty()) {
      g.staged = free_events_.back();
      free_events_.pop_back();
    }
  }
  if (g.staged == nullptr) {
    check_cuda(cudaEventCreateWithFlags(&g.staged, cudaEventDisableTiming),
               "cudaEventCreateWithFlags" + name, where_);
  }
  check_cuda(cudaEventRecord(g.staged, stream), "cudaEventRecord(sources staged)" + name, where_);
  // 2. The gate, which the proxy opens once UCX has moved the group.
  detail::check_cu(
      detail::cuda_driver().wait_value64(stream, detail::device_address(gate_on_device_), g.seq,
                                         CU_STREAM_WAIT_VALUE_GEQ),
      "cuStreamWaitValue64(the proxy's completion flag)" + name, where_);
  // 3. The chunks this rank received, from the mirrors to their destinations.
  for (const Exchange& x : group) {
    if (x.bytes == 0) continue;
    const Mirror& m = *mirrors_.at(x.dst->id);
    check_cuda(
        cudaMemcpyAsync(static_cast<char*>(x.dst->local) + x.recv_offset,
                        static_cast<const char*>(m.host) + x.recv_offset, x.bytes,
                        cudaMemcpyHostToDevice, stream),
        "cudaMemcpyAsync(" + std::to_string(x.bytes) + " bytes from the receive mirror)" + name,
        where_);
  }
  {
    const std::lock_guard<std::mutex> lock(mu_);
    groups_.push_back(std::move(g));
  }
  work_.notify_one();
  return -1;
}

bool UcxStagedTransport::staged(const Group& g) const {
  const cudaError_t rc = cudaEventQuery(g.staged);
  if (rc == cudaErrorNotReady) {
    static_cast<void>(cudaGetLastError());  // not an error
    return false;
  }
  check_cuda(rc, "cudaEventQuery(sources of UCX exchange group " + std::to_string(g.seq) + ")",
             where_);
  return true;
}

bool UcxStagedTransport::proxy_step() {
  bool moved = false;
  // Start, in order, the groups whose sources are on the host.
  for (Group& g : groups_) {
    if (g.ucx >= 0) continue;
    if (!staged(g)) break;
    g.ucx = ucx_->start(g.host, nullptr);
    moved = true;
  }
  ucx_->progress();
  // Open the gate for each group UCX has completed, in order.
  while (!groups_.empty() && groups_.front().ucx >= 0 && ucx_->test(groups_.front().ucx)) {
    Group& g = groups_.front();
    open_gate(g.seq);
    free_events_.push_back(g.staged);
    groups_.pop_front();
    moved = true;
  }
  return moved;
}

std::string UcxStagedTransport::proxy_blocker() const {
  if (groups_.empty()) return "the UCX proxy";
  const Group& g = groups_.front();
  if (g.ucx < 0) {
    return "UCX exchange group " + std::to_string(g.seq) + " ('" + g.labels +
           "'): this GPU's copy of its chunks to the host";
  }
  return ucx_->waiting_for(g.ucx);
}

void UcxStagedTransport::proxy_main() {
  // The proxy's CUDA calls (event queries) are on the backend's device.
  const bool on_device = cudaSetDevice(device_) == cudaSuccess;
  std::unique_lock<std::mutex> lock(mu_);
  if (!on_device) fail("cudaSetDevice(" + std::to_string(device_) + ") failed in the UCX proxy");
  int idle = 0;
  uint64_t steps = 0;
  while (!stop_) {
    if (groups_.empty() || !failed_.empty()) {
      drained_.notify_all();
      work_.wait(lock, [&] { return stop_ || (!groups_.empty() && failed_.empty()); });
      continue;
    }
    bool moved = false;
    try {
      moved = proxy_step();
      if ((++steps & 255) == 0 || moved) {
        const std::string b = proxy_blocker();
        const std::lock_guard<std::mutex> bl(blocker_mutex_);
        blocker_ = b;
      }
    } catch (const std::exception& e) {
      fail(e.what());
      continue;
    }
    if (groups_.empty()) drained_.notify_all();
    // Let the backend's thread in (start, drain) and, after a run of idle steps, the other
    // ranks' processes at the cores (more ranks than cores in tests).
    lock.unlock();
    if (moved) {
      idle = 0;
    } else if (++idle >= 64) {
      idle = 0;
      sched_yield();
    }
    lock.lock();
  }
}

void UcxStagedTransport::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto report = [&] {
    // Once: a later drain (the teardown's, a noexcept release's) has nothing left to wait for,
    // and start() refuses any new group.
    failure_reported_ = true;
    throw Error(failed_);
  };
  if (!failed_.empty() && !failure_reported_) report();
  if (groups_.empty()) return;
  {
    const std::lock_guard<std::mutex> bl(blocker_mutex_);
    blocker_ = proxy_blocker();
  }
  const watchdog::WaitScope wait([this] {
    const std::lock_guard<std::mutex> bl(blocker_mutex_);
    return blocker_ + " (" + where_ + ")";
  });
  drained_.wait(lock, [&] { return groups_.empty() || !failed_.empty(); });
  if (!failed_.empty() && !failure_reported_) report();
}

void UcxStagedTransport::fail(const std::string& why) noexcept {
  // The GPU must not wait for this host any more: every stream wait passes, what those groups
  // copy back is not the peers' data (the error on its way out says so), and no group runs
  // after this one.
  failed_ = why;
  open_gate(std::numeric_limits<uint64_t>::max());
  for (const Group& g : groups_) free_events_.push_back(g.staged);
  groups_.clear();
  drained_.notify_all();
}

}  // namespace

std::unique_ptr<Transport> make_ucx_staged_transport(MPI_Comm tp_comm, const std::string& where,
                                                     std::function<std::string(int)> describe_peer,
                                                     std::string& why_not) {
  int size = 1;
  check_mpi(MPI_Comm_size(tp_comm, &size), "MPI_Comm_size(tp)");
  const auto agree = [&](const std::string& problem) {
    return detail::agree_on_problems(tp_comm, size, problem, why_not,
                                     "MPI_Allgather(UCX staging checks)");
  };
  // The gate: the stream waits on it in host memory the GPU can read (mapped pinned memory).
  std::string problem = detail::stream_memops_problem(nullptr);
  void* gate = nullptr;
  void* gate_on_device = nullptr;
  if (problem.empty()) {
    if (const cudaError_t rc = cudaHostAlloc(&gate, sizeof(uint64_t), cudaHostAllocMapped);
        rc != cudaSuccess) {
      problem = cuda_problem(rc, "cudaHostAlloc(the UCX completion flag)");
      static_cast<void>(cudaGetLastError());
      gate = nullptr;
    } else if (const cudaError_t drc = cudaHostGetDevicePointer(&gate_on_device, gate, 0);
               drc != cudaSuccess) {
      problem = cuda_problem(drc, "cudaHostGetDevicePointer(the UCX completion flag)");
      static_cast<void>(cudaGetLastError());
    } else {
      *static_cast<uint64_t*>(gate) = 0;
    }
  }
  if (!agree(problem)) {
    if (gate != nullptr) cudaFreeHost(gate);
    why_not = "the CUDA backend's UCX staging: " + why_not;
    return nullptr;
  }
  std::unique_ptr<UcxTransport> ucx =
      UcxTransport::create(tp_comm, where, std::move(describe_peer), why_not, true);
  if (!ucx) {
    cudaFreeHost(gate);
    return nullptr;
  }
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice", where);
  return std::make_unique<UcxStagedTransport>(std::move(ucx), static_cast<uint64_t*>(gate),
                                              gate_on_device, device, where);
}

}  // namespace cgemm
