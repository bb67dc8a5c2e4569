// UCX for the CUDA backend, device buffers staged through pinned host memory (see
// ucx_staged_transport.hpp).

#include "cgemm/collective/ucx_staged_transport.hpp"

#include <cuda_runtime_api.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cgemm/collective/group_agreement.hpp"
#include "cgemm/collective/mesh_comms.hpp"
#include "cgemm/collective/ucx_transport.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/error.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cuda_driver.hpp"

namespace cgemm {
namespace {

using detail::cuda_problem;

// Chunks in the send staging start at this alignment (UCX and the copy engines like it).
constexpr size_t kStagingAlign = 256;

size_t align_up(size_t n) { return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign; }

class UcxStagedTransport final : public Transport {
 public:
  UcxStagedTransport(std::unique_ptr<UcxTransport> ucx, uint64_t* flags, void* flags_on_device,
                     std::string where);
  ~UcxStagedTransport() override;
  UcxStagedTransport(const UcxStagedTransport&) = delete;
  UcxStagedTransport& operator=(const UcxStagedTransport&) = delete;

  std::string name() const override { return "ucx (staged through pinned host memory)"; }
  std::string capture_refusal() const override {
    return "the staged UCX transport's host proxy thread drives every transfer (a replay would "
           "wait on a host that no longer posts it)";
  }
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
    std::vector<Exchange> host;  // the same exchanges from the staging into the mirrors
    // Their labels, owned: the caller's may be gone before the proxy starts the group (the
    // sequential collectives name exchanges with temporaries). Reserved once, never grown.
    std::vector<std::string> label_copies;
    std::string labels;
    int64_t ucx = -1;  // the UCX group's handle once started
  };

  void proxy_main();
  bool proxy_step();                  // under mu_; true when something moved
  std::string proxy_blocker() const;  // under mu_
  void ensure_staging(size_t bytes);
  // Step 1 of group g is done: the stream wrote g.seq (or more) after its copies.
  bool staged(const Group& g) const {
    return std::atomic_ref<uint64_t>(flags_[kStaged]).load(std::memory_order_acquire) >= g.seq;
  }
  void fail(const std::string& why) noexcept;  // under mu_
  void open_gate(uint64_t value) noexcept {
    std::atomic_ref<uint64_t>(flags_[kGate]).store(value, std::memory_order_release);
  }
  CUdeviceptr on_device(int flag) const {
    return detail::device_address(static_cast<char*>(flags_on_device_) + flag * sizeof(uint64_t));
  }

  std::unique_ptr<UcxTransport> ucx_;  // under mu_ (a serialized UCP worker)
  // Two words of mapped pinned memory: kGate, written by the proxy and waited on by the
  // stream; kStaged, written by the stream after step 1 and polled by the proxy, which so makes
  // no CUDA call at all (one could block behind the backend thread's, as the first version's
  // host-driven gate did).
  static constexpr int kGate = 0, kStaged = 1;
  // The gate's value that lets every group through for good. Not UINT64_MAX:
  // CU_STREAM_WAIT_VALUE_GEQ compares with wraparound ((int64_t)(*addr - value) >= 0), so it
  // must stay within 2^63 of every group number.
  static constexpr uint64_t kOpenForGood = uint64_t{1} << 62;
  uint64_t* flags_ = nullptr;        // as the host reads and writes them
  void* flags_on_device_ = nullptr;  // as the GPU does
  cudaStream_t stream_ = nullptr;    // the one stream every group is started on
  std::string where_;
  std::map<int, std::unique_ptr<Mirror>> mirrors_;  // by SymmetricBuffer::id; stable addresses
  void* staging_ = nullptr;                         // pinned
  size_t staging_bytes_ = 0;
  uint64_t seq_ = 0;

  std::mutex mu_;
  std::condition_variable work_;     // to the proxy: a group, or stop
  std::condition_variable drained_;  // from the proxy: groups_ empty, or failed
  std::deque<Group> groups_;         // started, not yet through the gate, in order
  std::string failed_;               // why the transport refuses further groups
  bool stop_ = false;
  std::mutex blocker_mutex_;  // the watchdog's thread reads blocker_ on a timeout
  std::string blocker_;
  std::thread proxy_;
};

UcxStagedTransport::UcxStagedTransport(std::unique_ptr<UcxTransport> ucx, uint64_t* flags,
                                       void* flags_on_device, std::string where)
    : ucx_(std::move(ucx)),
      flags_(flags),
      flags_on_device_(flags_on_device),
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
  open_gate(kOpenForGood);
  cudaDeviceSynchronize();
  // UCP first (its flush and endpoint close, and its registrations of the mirrors), while the
  // memory it may still touch is there; then that memory.
  ucx_.reset();
  for (auto& [id, m] : mirrors_) {
    if (m->host != nullptr) cudaFreeHost(m->host);
  }
  mirrors_.clear();
  if (staging_ != nullptr) cudaFreeHost(staging_);
  cudaFreeHost(flags_);
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
  // The reuse rules (the header) hold for groups in one stream's order.
  if (stream_ == nullptr) stream_ = stream;
  if (stream != stream_) {
    throw Error(where_ + ": the UCX transport's groups must all start on one stream");
  }
  size_t send_bytes = 0;
  for (const Exchange& x : group) {
    if (mirrors_.find(x.dst->id) == mirrors_.end()) {
      throw Error(where_ + ": exchange '" + (x.label != nullptr ? x.label : "unnamed") +
                  "' names symmetric buffer " + std::to_string(x.dst->id) +
                  ", which is not attached to the UCX transport");
    }
    send_bytes += align_up(x.bytes);
  }
  Group g;
  g.seq = ++seq_;
  const std::string name = " (UCX exchange group " + std::to_string(g.seq) + ")";
  // Any failure from here on ends the transport (fail()): a group this rank skipped would put
  // its UCX numbering out of step with its peers' (a wrong answer if the caller went on), and
  // once the stream wait is queued only an open gate lets the stream, and whatever waits for
  // it, go on.
  try {
    ensure_staging(send_bytes);
    // 1. The chunks this rank sends, to the staging.
    g.label_copies.reserve(group.size());
    size_t off = 0;
    for (const Exchange& x : group) {
      Exchange h = x;
      g.label_copies.emplace_back(x.label != nullptr ? x.label : "unnamed");
      h.label = g.label_copies.back().c_str();
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
      g.labels += (g.labels.empty() ? "" : " + ") + g.label_copies.back();
    }
    const detail::CudaDriver& d = detail::cuda_driver();
    detail::check_cu(
        d.write_value64(stream, on_device(kStaged), g.seq, CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue64(the sources are staged)" + name, where_);
    // 2. The gate, which the proxy opens once UCX has moved the group.
    detail::check_cu(d.wait_value64(stream, on_device(kGate), g.seq, CU_STREAM_WAIT_VALUE_GEQ),
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
  } catch (const std::exception& e) {
    const std::lock_guard<std::mutex> lock(mu_);
    fail(e.what());
    throw;
  }
  {
    const std::lock_guard<std::mutex> lock(mu_);
    groups_.push_back(std::move(g));
  }
  work_.notify_one();
  return -1;
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
  std::unique_lock<std::mutex> lock(mu_);
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
    // Let the backend's thread in (start, drain): a mutex is not handed to a waiter, so the
    // proxy yields after every step, and after a run of idle steps sleeps a little (more
    // ranks than cores in tests).
    lock.unlock();
    if (moved) {
      idle = 0;
      sched_yield();
    } else if (++idle >= 64) {
      idle = 0;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    } else {
      sched_yield();
    }
    lock.lock();
  }
}

void UcxStagedTransport::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  // Every time: what the failed groups copied back is not the peers' data, so no host wait may
  // pass as if it were (the teardown's and a buffer release's catch it).
  if (!failed_.empty()) throw Error(failed_);
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
  if (!failed_.empty()) throw Error(failed_);
}

void UcxStagedTransport::fail(const std::string& why) noexcept {
  // The GPU must not wait for this host any more: every stream wait passes, what those groups
  // copy back is not the peers' data (the error on its way out says so), and no group runs
  // after this one.
  failed_ = why;
  open_gate(kOpenForGood);
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
  // The gate and the staged flag: host memory the GPU reads and writes (mapped pinned memory).
  std::string problem = detail::stream_memops_problem(nullptr);
  void* flags = nullptr;
  void* flags_on_device = nullptr;
  if (problem.empty()) {
    if (const cudaError_t rc = cudaHostAlloc(&flags, 2 * sizeof(uint64_t), cudaHostAllocMapped);
        rc != cudaSuccess) {
      problem = cuda_problem(rc, "cudaHostAlloc(the UCX staging flags)");
      static_cast<void>(cudaGetLastError());
      flags = nullptr;
    } else if (const cudaError_t drc = cudaHostGetDevicePointer(&flags_on_device, flags, 0);
               drc != cudaSuccess) {
      problem = cuda_problem(drc, "cudaHostGetDevicePointer(the UCX staging flags)");
      static_cast<void>(cudaGetLastError());
    } else {
      static_cast<uint64_t*>(flags)[0] = 0;
      static_cast<uint64_t*>(flags)[1] = 0;
    }
  }
  if (!agree(problem)) {
    if (flags != nullptr) cudaFreeHost(flags);
    why_not = "the CUDA backend's UCX staging: " + why_not;
    return nullptr;
  }
  std::unique_ptr<UcxTransport> ucx =
      UcxTransport::create(tp_comm, where, std::move(describe_peer), why_not, true);
  if (!ucx) {
    cudaFreeHost(flags);
    return nullptr;
  }
  try {
    return std::make_unique<UcxStagedTransport>(std::move(ucx), static_cast<uint64_t*>(flags),
                                                flags_on_device, where);
  } catch (...) {  // the proxy thread could not start
    cudaFreeHost(flags);
    throw;
  }
}

}  // namespace cgemm
