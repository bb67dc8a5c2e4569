// The CUDA backend: one GPU per rank (Context's backend rule picks it; with gpu_sharing several
// ranks share one), cuBLASLt GEMMs on num_max_streams compute streams, and the ring's exchanges
// on one communication stream, moved by copy engines over CUDA IPC when the TP group shares a
// node (else by NCCL send/recv). The sequential path's collectives run on NCCL, or, when GPUs
// are shared (NCCL refuses two ranks of one communicator on one GPU), as copy-engine exchanges
// into a staging buffer followed by a local copy or an fp32 sum in rank order. Everything is
// asynchronous; ordering between streams is expressed with events only, never host waits,
// except where the interface asks for a synchronous call (copies to and from the host,
// synchronize, time_ms).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cgemm/collective/ce_transport.hpp"
#include "cgemm/collective/nccl_transport.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cgemm/core/watchdog.hpp"
#include "cgemm/gemm/cublaslt_gemm.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cgemm/sharding/reorder.hpp"
#include "cuda_kernels.hpp"

namespace cgemm {
namespace {

constexpr size_t kMaxPendingExchangeEvents = 256;  // beyond this, completed ones are recycled

std::string bytes_str(size_t bytes) { return std::to_string(bytes) + " bytes"; }

// OverlapOptions priorities count from 0 = highest; CUDA's are numerically lowest = highest.
int cuda_priority(int option, int least, int greatest) {
  return std::min(greatest + std::max(option, 0), least);
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const MeshComms& comms, const OverlapOptions& opts, const CudaPlacement& placement);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  std::string transport() const override {
    // The transports the peers got (choose_transports); one name when they agree.
    std::string names;
    for (const Transport* t : peer_transport_) {
      if (t != nullptr && names.find(t->name()) == std::string::npos) {
        names += (names.empty() ? "" : " + ") + t->name();
      }
    }
    return names.empty() ? "none (tp = 1)" : names;
  }
  std::string describe() const override;
  int tp_rank() const override { return comms_.tp_rank(); }
  int tp_size() const override { return comms_.tp(); }
  int num_streams() const override { return static_cast<int>(streams_.size()); }
  int compute_capability() const override { return props_.major * 10 + props_.minor; }
  void* native_stream() const override { return streams_[0]; }

  void* allocate(size_t bytes) override;
  void release(void* p) noexcept override;
  SymmetricBuffer allocate_symmetric(size_t bytes) override;
  void release_symmetric(SymmetricBuffer& b) noexcept override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                   const Shape& offset, uint64_t seed, float std) override;
  void fill_nan(void* dst, DType dtype, int64_t count) override;

  void copy(void* dst, const void* src, size_t bytes, int stream, const char* label) override;
  void gemm(const GemmTask& task, int stream) override;
  void reorder(ReorderKind kind, const Shape& shape, int dp_size, const void* src, void* dst,
               DType dtype, int stream) override;
  void sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                    const void* bias, int64_t bias_len, void* out, DType out_dtype,
                    int stream) override;

  ExchangeToken start_exchange(std::span<const Exchange> group, int after_stream) override;
  void wait_exchange(ExchangeToken token, int stream) override;

  void all_gather(const void* src, void* dst, size_t bytes_per_rank, int stream,
                  const char* label) override;
  void reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank, int stream,
                      const char* label) override;
  void all_reduce(void* buf, DType dtype, int64_t count, int stream, const char* label) override;

  void fork_streams() override { fork_from_main(); }
  void join_streams(int stream) override;
  void synchronize() override;
  double time_ms(const std::function<void()>& body) override;
  void set_tracing(bool on) override;
  bool tracing() const override { return tracing_; }
  std::vector<TraceSpan> take_trace() override;

 private:
  void check(cudaError_t rc, std::string_view call) const { check_cuda(rc, call, where_); }
  [[noreturn]] void fail(const std::string& why) const { throw Error(where_ + ": " + why); }
  cudaStream_t stream(int s, const char* call) const;
  // Every stream (compute and communication) except stream 0 joins into stream 0, so work
  // issued next on stream 0 runs after everything issued so far.
  void gather_into_main();
  // Every other stream waits for what stream 0 has issued so far.
  void fork_from_main();
  cudaEvent_t take_event();
  void recycle_completed_exchanges(bool all_done);
  // The sequential path's collectives without NCCL (shared GPUs): every rank pushes blocks
  // into the peers' copies of `staging_` at its own slot, then waits on stream s.
  const SymmetricBuffer& staging(size_t bytes);
  void ce_collective(const SymmetricBuffer& dst, size_t bytes,
                     const std::function<const void*(int)>& block_for, int s,
                     const std::string& label);
  static std::string named(const char* label, const char* what) {
    return label != nullptr ? std::string(label) : std::string(what);
  }
  void copy_on(void* dst, const void* src, size_t bytes, cudaStream_t st, const char* what);
  // What a host wait on this GPU is stuck behind, for the watchdog: the oldest exchange not yet
  // complete (its event is queried from the watchdog's thread), else the GPU's own work.
  watchdog::WaitScope gpu_wait(const char* call) const;
  void check_nccl_async() const {
    if (nccl_) nccl_->check_async_error();
  }

  const MeshComms& comms_;
  OverlapOptions opts_;
  CudaPlacement placement_;
  SymmetricBuffer staging_;
  std::string where_;
  int device_ = -1;
  cudaDeviceProp props_{};
  int priority_least_ = 0, priority_greatest_ = 0;
  std::vector<cudaStream_t> streams_;
  cudaStream_t comm_stream_ = nullptr;
  std::vector<cudaEvent_t> stream_events_;  // one per compute stream, then the comm stream
  cudaEvent_t after_event_ = nullptr;
  // Tracing: a pair of timing events around each traced call, resolved in take_trace().
  struct PendingSpan {
    std::string name;
    const char* category;
    int lane;
    cudaEvent_t begin, end;
  };
  template <class Name, class Work>
  void traced(const char* category, Name&& name, int lane, cudaStream_t st, Work&& work);
  bool tracing_ = false;
  cudaEvent_t trace_origin_ = nullptr;
  std::vector<PendingSpan> trace_;
  cudaEvent_t timing_start_ = nullptr, timing_stop_ = nullptr;
  std::unique_ptr<CublasLtGemm> gemm_;
  std::unique_ptr<NcclTransport> nccl_;
  std::unique_ptr<CeTransport> ce_;
  std::string ce_why_not_;
  // Exchanges not yet known to be complete: their event and what they are (for timeouts).
  struct PendingExchange {
    cudaEvent_t event = nullptr;
    std::string what;
  };
  std::map<ExchangeToken, PendingExchange> exchanges_;
  std::vector<cudaEvent_t> free_events_;
  ExchangeToken next_token_ = 0;
  // The transports on offer, in order of preference, and the one chosen for each TP rank.
  std::vector<Transport*> offered_;
  std::vector<Transport*> peer_transport_;
  std::map<int, SymmetricBuffer> symmetric_;  // live symmetric buffers by id
  int next_symmetric_id_ = 0;
  std::set<void*> allocations_;
};

CudaBackend::CudaBackend(const MeshComms& comms, const OverlapOptions& opts,
                         const CudaPlacement& placement)
    : comms_(comms), opts_(opts), placement_(placement) {
  where_ = "cuda backend, rank " + std::to_string(comms.world_rank()) + " (tp rank " +
           std::to_string(comms.tp_rank()) + ", local rank " + std::to_string(comms.local_rank()) +
           " on " + comms.host_name() + ")";
  if (opts.num_max_streams < 1) {
    fail("num_max_streams must be at least 1, got " + std::to_string(opts.num_max_streams));
  }
  int count = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess || count == 0) {
    fail(std::string("no usable GPU: cudaGetDeviceCount ") +
         (rc != cudaSuccess
              ? std::string("failed: ") + cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")"
              : std::string("found none")));
  }
  if (placement.device < 0 || placement.device >= count) {
    fail("GPU " + std::to_string(placement.device) + " asked for, but this process sees " +
         std::to_string(count));
  }
  device_ = placement.device;
  check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  check(cudaGetDeviceProperties(&props_, device_), "cudaGetDeviceProperties");
  check(cudaDeviceGetStreamPriorityRange(&priority_least_, &priority_greatest_),
        "cudaDeviceGetStreamPriorityRange");

  // Non-blocking streams: no implicit ordering with the legacy default stream, which libraries
  // and user code may use.
  const int compute_prio =
      cuda_priority(opts.compute_stream_priority, priority_least_, priority_greatest_);
  const int comm_prio =
      cuda_priority(opts.communication_stream_priority, priority_least_, priority_greatest_);
  for (int i = 0; i < opts.num_max_streams; ++i) {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, compute_prio),
          "cudaStreamCreateWithPriority(compute stream " + std::to_string(i) + ")");
    streams_.push_back(s);
  }
  check(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, comm_prio),
        "cudaStreamCreateWithPriority(communication stream)");
  for (size_t i = 0; i <= streams_.size(); ++i) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    stream_events_.push_back(e);
  }
  check(cudaEventCreateWithFlags(&after_event_, cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  check(cudaEventCreate(&timing_start_), "cudaEventCreate(timing)");
  check(cudaEventCreate(&timing_stop_), "cudaEventCreate(timing)");

  gemm_ = std::make_unique<CublasLtGemm>(where_);
  for (cudaStream_t s : streams_) gemm_->add_stream(s);

  // Collective from here on: every rank of the TP group reaches these in the same order.
  // A shared GPU gets no NCCL communicator at all: NCCL refuses two ranks of one on a device.
  if (!placement.gpu_sharing) nccl_ = std::make_unique<NcclTransport>(comms.tp_comm(), where_);
  if (comms.tp() == 1) {
    ce_why_not_ = "tp = 1: nothing to move";
  } else if (!opts.use_ce) {
    ce_why_not_ = "use_ce = false";
  } else if (!comms.tp_group_on_one_node()) {
    ce_why_not_ = "the TP group spans nodes";
  } else {
    ce_ = CeTransport::create(comms.tp_comm(), where_, ce_why_not_);
  }
  if (placement.gpu_sharing && comms.tp() > 1 && !ce_) {
    // create() answers alike on every TP rank, so every rank fails here, none waits.
    fail(
        "gpu_sharing needs the copy-engine transport (NCCL refuses two ranks of one "
        "communicator on one GPU), and it cannot be used: " +
        ce_why_not_);
  }
  // Copy engines where they reach a peer, NCCL for the rest.
  for (Transport* t : {static_cast<Transport*>(ce_.get()), static_cast<Transport*>(nccl_.get())}) {
    if (t != nullptr) offered_.push_back(t);
  }
  if (comms.tp() > 1) {
    peer_transport_ = choose_transports(offered_, comms.tp_rank(), comms.tp(), where_);
  }
}

CudaBackend::~CudaBackend() {
  // Let queued work finish before anything it uses goes away. Errors are ignored: a
  // destructor cannot report them, and the next CUDA call of the process would.
  cudaDeviceSynchronize();
  staging_ = SymmetricBuffer{};  // freed with the other symmetric buffers below
  for (auto& [id, s] : symmetric_) {
    for (Transport* t : offered_) t->detach(s);
    cudaFree(s.local);
  }
  symmetric_.clear();
  ce_.reset();
  gemm_.reset();
  nccl_.reset();
  for (auto& [token, x] : exchanges_) cudaEventDestroy(x.event);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  for (cudaEvent_t e : stream_events_) cudaEventDestroy(e);
  for (const PendingSpan& p : trace_) {
    cudaEventDestroy(p.begin);
    cudaEventDestroy(p.end);
  }
  for (cudaEvent_t e : {after_event_, timing_start_, timing_stop_, trace_origin_}) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
  for (void* p : allocations_) cudaFree(p);
}

std::string CudaBackend::describe() const {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const auto ver = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  std::ostringstream s;
  s << "backend: cuda (cuBLASLt GEMMs, fp32 accumulation)\n"
    << "device: GPU " << device_ << " " << props_.name << ", compute capability " << props_.major
    << "." << props_.minor << ", " << props_.multiProcessorCount << " SMs, "
    << props_.totalGlobalMem / (size_t{1} << 20) << " MiB\n"
    << "libraries: CUDA runtime " << ver(runtime) << " (driver supports " << ver(driver) << "), "
    << CublasLtGemm::version() << ", " << NcclTransport::version() << "\n";
  if (ce_) {
    s << "transport: copy-engine (CUDA IPC): " << ce_->describe() << "\n";
  } else if (nccl_) {
    s << "transport: nccl send/recv (copy engines not used: " << ce_why_not_ << ")\n";
  } else {
    s << "transport: none (" << ce_why_not_ << ")\n";
  }
  if (placement_.gpu_sharing) {
    s << "GPU shared by " << placement_.ranks_per_gpu
      << " ranks: no NCCL communicator; the sequential path's collectives run as copy-engine "
         "exchanges; times are not a speed measurement\n";
  }
  s << "streams: " << streams_.size() << " compute (priority " << opts_.compute_stream_priority
    << " -> CUDA "
    << cuda_priority(opts_.compute_stream_priority, priority_least_, priority_greatest_)
    << "), 1 communication (priority " << opts_.communication_stream_priority << " -> CUDA "
    << cuda_priority(opts_.communication_stream_priority, priority_least_, priority_greatest_)
    << "; CUDA range " << priority_greatest_ << " highest .. " << priority_least_ << ")\n"
    << "num_sm_for_communication=" << opts_.num_sm_for_communication
    << ": copy engines take no SMs; NCCL is not capped by it ("
    << (nccl_ ? nccl_->settings() : std::string("no NCCL communicator")) << ")\n"
    << "cuBLASLt workspace: " << gemm_->workspace_bytes() / (size_t{1} << 20)
    << " MiB per stream; FP8 fast accumulation "
    << (gemm_->fp8_fast_accumulation() ? "on" : "off (NVTE_FP8_GEMM_HIGH_PRECISION_ACCUMULATION)")
    << "; algorithms: "
    << (gemm_->autotune() ? "timed, best of the heuristic's first " : "heuristic's first of ")
    << gemm_->candidates() << " (CGEMM_GEMM_AUTOTUNE, CGEMM_GEMM_CANDIDATES)\n"
    << "use_ce=" << (opts_.use_ce ? "true" : "false")
    << ", aggregate_all_gather=" << (opts_.aggregate_all_gather ? "true" : "false")
    << ", chunks_per_rank=" << opts_.chunks_per_rank;
  return s.str();
}

cudaStream_t CudaBackend::stream(int s, const char* call) const {
  if (s < 0 || s >= static_cast<int>(streams_.size())) {
    fail(std::string(call) + ": stream " + std::to_string(s) + " out of range (" +
         std::to_string(streams_.size()) + " compute streams)");
  }
  return streams_[static_cast<size_t>(s)];
}

void CudaBackend::gather_into_main() {
  for (size_t i = 1; i <= streams_.size(); ++i) {
    cudaStream_t s = i < streams_.size() ? streams_[i] : comm_stream_;
    check(cudaEventRecord(stream_events_[i], s), "cudaEventRecord(join)");
    check(cudaStreamWaitEvent(streams_[0], stream_events_[i], 0), "cudaStreamWaitEvent(join)");
  }
}

void CudaBackend::fork_from_main() {
  check(cudaEventRecord(stream_events_[0], streams_[0]), "cudaEventRecord(fork)");
  for (size_t i = 1; i <= streams_.size(); ++i) {
    cudaStream_t s = i < streams_.size() ? streams_[i] : comm_stream_;
    check(cudaStreamWaitEvent(s, stream_events_[0], 0), "cudaStreamWaitEvent(fork)");
  }
}

// --- memory ---

void* CudaBackend::allocate(size_t bytes) {
  void* p = nullptr;
  // Never zero-sized, so every buffer has a distinct address (as on the CPU backend).
  check(cudaMalloc(&p, std::max<size_t>(bytes, 1)), "cudaMalloc(" + bytes_str(bytes) + ")");
  allocations_.insert(p);
  return p;
}

void CudaBackend::release(void* p) noexcept {
  if (p != nullptr && allocations_.erase(p) != 0) cudaFree(p);  // cudaFree waits for the device
}

SymmetricBuffer CudaBackend::allocate_symmetric(size_t bytes) {
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (rc != cudaSuccess) {
    p = nullptr;
    static_cast<void>(cudaGetLastError());  // reported below, after the collective part
  }
  const SymmetricBuffer buf{p, bytes, next_symmetric_id_++};
  // Collective even when this rank's allocation failed: the peers learn it inside attach (a
  // null buffer has no IPC handle) and every rank throws, none hangs.
  size_t attached = 0;
  try {
    for (; attached < offered_.size(); ++attached) offered_[attached]->attach(buf);
  } catch (const Error&) {
    for (size_t i = 0; i < attached; ++i) offered_[i]->detach(buf);
    if (p != nullptr) cudaFree(p);
    if (rc != cudaSuccess) check(rc, "cudaMalloc(symmetric buffer, " + bytes_str(bytes) + ")");
    throw;
  }
  check(rc, "cudaMalloc(symmetric buffer, " + bytes_str(bytes) + ")");
  symmetric_[buf.id] = buf;
  return buf;
}

void CudaBackend::release_symmetric(SymmetricBuffer& b) noexcept {
  auto it = symmetric_.find(b.id);
  if (it != symmetric_.end()) {
    // In-flight exchanges may still read or write it, here or (through this rank's pushes)
    // on a peer: wait for this device before closing the peers' mappings and freeing.
    const auto wait = gpu_wait("releasing a symmetric buffer");
    cudaDeviceSynchronize();
    for (Transport* t : offered_) t->detach(it->second);
    cudaFree(it->second.local);
    symmetric_.erase(it);
  }
  b = SymmetricBuffer{};
}

watchdog::WaitScope CudaBackend::gpu_wait(const char* call) const {
  std::vector<std::pair<cudaEvent_t, std::string>> pending;
  for (const auto& [token, x] : exchanges_) pending.emplace_back(x.event, x.what);
  return watchdog::WaitScope([pending = std::move(pending), call, where = where_] {
    for (const auto& [event, what] : pending) {
      if (cudaEventQuery(event) == cudaErrorNotReady) {
        return what + " on the communication stream, in " + call + " (" + where + ")";
      }
    }
    return std::string("this GPU's work, in ") + call + " (" + where + ")";
  });
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  // Synchronous, like the CPU backend: the copy sees every result issued before it.
  {
    const auto wait = gpu_wait("a copy to the host");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(before copy to host)");
  }
  check(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDefault),
        "cudaMemcpy(device to host, " + bytes_str(bytes) + ")");
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  {
    const auto wait = gpu_wait("a copy from the host");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize(before copy from host)");
  }
  check(cudaMemcpy(dst, host_src, bytes, cudaMemcpyDefault),
        "cudaMemcpy(host to device, " + bytes_str(bytes) + ")");
}

void CudaBackend::fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                              const Shape& offset, uint64_t seed, float std) {
  const std::string what = "fill_normal(" + std::string(dtype_name(dtype)) + ", global " +
                           shape_str(global) + ", local " + shape_str(local) + ", offset " +
                           shape_str(offset) + ")";
  if (dtype != DType::kFloat32 && dtype != DType::kBFloat16 && dtype != DType::kFloat16) {
    fail(what + ": only float32, bfloat16 and float16 can be filled");
  }
  if (local.size() != global.size() || offset.size() != global.size()) {
    fail(what + ": global, local and offset must have the same rank");
  }
  if (local.size() > static_cast<size_t>(cuda::kMaxFillDims)) {
    fail(what + ": at most " + std::to_string(cuda::kMaxFillDims) + " dimensions");
  }
  for (size_t d = 0; d < local.size(); ++d) {
    if (local[d] < 0 || offset[d] < 0 || offset[d] + local[d] > global[d]) {
      fail(what + ": the shard does not lie inside the global tensor along dim " +
           std::to_string(d));
    }
  }
  if (num_elements(local) == 0) return;
  // Filling is setup, not part of a schedule: order it after and before everything.
  gather_into_main();
  check(cuda::launch_fill_normal(dst, dtype, global, local, offset, seed, std, streams_[0]), what);
  fork_from_main();
}

void CudaBackend::fill_nan(void* dst, DType dtype, int64_t count) {
  uint32_t pattern = 0;
  switch (dtype) {
    case DType::kFloat32:
      pattern = 0x7fc00000u;
      break;
    case DType::kBFloat16:
      pattern = 0x7fc0u;
      break;
    case DType::kFloat16:
      pattern = 0x7e00u;
      break;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      pattern = 0x7fu;  // a NaN in both FP8 formats
      break;
    default:
      fail("fill_nan: dtype " + std::string(dtype_name(dtype)) + " has no NaN");
  }
  if (count < 0) fail("fill_nan: negative count " + std::to_string(count));
  if (count == 0) return;
  gather_into_main();
  check(cuda::launch_fill_pattern(dst, dtype_size(dtype), pattern, count, streams_[0]),
        "fill_nan(" + std::string(dtype_name(dtype)) + ", " + std::to_string(count) + " elements)");
  fork_from_main();
}

// --- compute ---

void CudaBackend::copy(void* dst, const void* src, size_t bytes, int s, const char* label) {
  cudaStream_t st = stream(s, "copy");
  const char* what = label != nullptr ? label : "copy";
  if (ranges_overlap(dst, src, bytes)) fail(std::string(what) + ": source and destination overlap");
  traced(
      "transfer", [&] { return std::string(what); }, s, st,
      [&] { copy_on(dst, src, bytes, st, what); });
}

void CudaBackend::gemm(const GemmTask& task, int s) {
  cudaStream_t st = stream(s, "gemm");
  traced(
      "gemm", [&] { return std::string(task.label ? task.label : "gemm"); }, s, st,
      [&] { gemm_->run(task, st); });
}

void CudaBackend::reorder(ReorderKind kind, const Shape& shape, int dp_size, const void* src,
                          void* dst, DType dtype, int s) {
  cudaStream_t st = stream(s, "reorder");
  const int tp = comms_.tp();
  check_reorder(kind, shape, dp_size, tp);  // gemm.py's assertions, with its messages
  const std::string what = std::string("reorder(") +
                           (kind == ReorderKind::kTpspLeading ? "tpsp-leading" : "dp-leading") +
                           ", shape " + shape_str(shape) + ", dp " + std::to_string(dp_size) +
                           ", tpsp " + std::to_string(tp) + ")";
  if (shape.size() < 2) fail(what + ": needs at least 2 dimensions");
  if (num_elements(shape) == 0) return;
  if (src == dst) fail(what + ": source and destination must not overlap");
  int64_t rest = 1;
  for (size_t d = 2; d < shape.size(); ++d) rest *= shape[d];
  const int64_t m = shape[1] / tp;
  const size_t block_bytes = static_cast<size_t>(m * rest) * dtype_size(dtype);
  traced(
      "reorder", [&] { return what; }, s, st,
      [&] { check(cuda::launch_reorder(kind, shape[0], tp, block_bytes, src, dst, st), what); });
}

void CudaBackend::sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                               const void* bias, int64_t bias_len, void* out, DType out_dtype,
                               int s) {
  cudaStream_t st = stream(s, "sum_partials");
  const std::string what = "sum_partials(" + std::to_string(parts.size()) + " parts of " +
                           std::string(dtype_name(part_dtype)) + ", " + std::to_string(count) +
                           " elements -> " + std::string(dtype_name(out_dtype)) +
                           (bias != nullptr ? ", bias of " + std::to_string(bias_len) : "") + ")";
  const auto supported = [](DType t) {
    return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
  };
  if (!supported(part_dtype) || !supported(out_dtype)) {
    fail(what + ": only float32, bfloat16 and float16 are supported");
  }
  if (parts.size() > static_cast<size_t>(cuda::kMaxParts)) {
    fail(what + ": at most " + std::to_string(cuda::kMaxParts) + " parts");
  }
  if (bias != nullptr && bias_len <= 0) fail(what + ": bias length must be positive");
  if (count < 0) fail(what + ": negative count");
  for (const void* p : parts) {
    if (p == nullptr && count > 0) fail(what + ": null part");
  }
  traced(
      "reduce", [&] { return what; }, s, st,
      [&] {
        check(cuda::launch_sum_partials(parts.data(), static_cast<int>(parts.size()), part_dtype,
                                        count, bias, bias_len, out, out_dtype, st),
              what);
      });
}

// --- transport ---

cudaEvent_t CudaBackend::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  return e;
}

void CudaBackend::recycle_completed_exchanges(bool all_done) {
  for (auto it = exchanges_.begin(); it != exchanges_.end();) {
    bool done = all_done;
    if (!done) {
      const cudaError_t rc = cudaEventQuery(it->second.event);
      if (rc == cudaErrorNotReady) static_cast<void>(cudaGetLastError());  // not an error
      if (rc != cudaSuccess && rc != cudaErrorNotReady) check(rc, "cudaEventQuery(exchange)");
      done = rc == cudaSuccess;
    }
    if (!done) break;  // one FIFO: the exchanges after one in flight are in flight too
    free_events_.push_back(it->second.event);
    it = exchanges_.erase(it);
  }
}

ExchangeToken CudaBackend::start_exchange(std::span<const Exchange> group, int after_stream) {
  validate_exchange_group(group, comms_.tp_rank(), comms_.tp(), where_);
  for (const Exchange& x : group) {
    auto it = symmetric_.find(x.dst->id);
    if (it == symmetric_.end() || it->second.local != x.dst->local) {
      fail("start_exchange '" + std::string(x.label != nullptr ? x.label : "unnamed") +
           "': the destination is not a live symmetric buffer of this backend");
    }
  }
  if (after_stream >= 0) {
    check(cudaEventRecord(after_event_, stream(after_stream, "start_exchange")),
          "cudaEventRecord(exchange dependency)");
    check(cudaStreamWaitEvent(comm_stream_, after_event_, 0),
          "cudaStreamWaitEvent(exchange dependency)");
  }
  const auto name = [&] {
    std::string n = group.empty() || group[0].label == nullptr ? "exchange" : group[0].label;
    for (size_t i = 1; i < group.size(); ++i) {
      if (group[i].label != nullptr) n += std::string(" + ") + group[i].label;
    }
    return n;
  };
  traced("transfer", name, static_cast<int>(streams_.size()), comm_stream_,
         [&] { start_group(peer_transport_, group, comm_stream_, where_); });
  if (exchanges_.size() >= kMaxPendingExchangeEvents) recycle_completed_exchanges(false);
  cudaEvent_t e = take_event();
  check(cudaEventRecord(e, comm_stream_), "cudaEventRecord(exchange)");
  std::string what = "exchange '" + name() + "'";
  for (const Exchange& x : group) {
    what += " (to tp rank " + std::to_string(x.send_peer) + ", from tp rank " +
            std::to_string(x.recv_peer) + ")";
  }
  exchanges_[next_token_] = {e, std::move(what)};
  return next_token_++;
}

void CudaBackend::wait_exchange(ExchangeToken token, int s) {
  cudaStream_t st = stream(s, "wait_exchange");
  if (token < 0 || token >= next_token_) {
    fail("wait_exchange: unknown exchange " + std::to_string(token) + " (" +
         std::to_string(next_token_) + " started)");
  }
  auto it = exchanges_.find(token);
  if (it == exchanges_.end()) return;  // recycled, so known to be complete
  check(cudaStreamWaitEvent(st, it->second.event, 0), "cudaStreamWaitEvent(exchange)");
}

const SymmetricBuffer& CudaBackend::staging(size_t bytes) {
  // Every TP rank calls the collectives with the same sizes in the same order, so every rank
  // grows its staging buffer at the same call: allocate_symmetric stays collective.
  if (staging_.local == nullptr || staging_.bytes < bytes) {
    if (staging_.local != nullptr) release_symmetric(staging_);
    staging_ = allocate_symmetric(bytes);
  }
  return staging_;
}

void CudaBackend::copy_on(void* dst, const void* src, size_t bytes, cudaStream_t st,
                          const char* what) {
  if (bytes == 0 || dst == src) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st),
        std::string("cudaMemcpyAsync(") + what + ", " + bytes_str(bytes) + ")");
}

void CudaBackend::ce_collective(const SymmetricBuffer& dst, size_t bytes,
                                const std::function<const void*(int)>& block_for, int s,
                                const std::string& label) {
  // One exchange per peer: block_for(to) to slot `me` of peer `to`'s copy of dst, and from
  // peer `from` into slot `from` of this rank's copy.
  const int tp = comms_.tp(), me = comms_.tp_rank();
  std::vector<Exchange> group;
  for (int i = 1; i < tp; ++i) {
    const int to = (me + i) % tp, from = (me - i + tp) % tp;
    group.push_back({.src = block_for(to),
                     .bytes = bytes,
                     .send_peer = to,
                     .send_offset = static_cast<size_t>(me) * bytes,
                     .recv_peer = from,
                     .recv_offset = static_cast<size_t>(from) * bytes,
                     .dst = &dst,
                     .label = label.c_str()});
  }
  if (group.empty()) return;
  // The staging buffer is read on any stream by the previous collective: the peers may write
  // into it again only after all of that.
  for (size_t i = 0; i < streams_.size(); ++i) {
    check(cudaEventRecord(stream_events_[i], streams_[i]), "cudaEventRecord(collective)");
    check(cudaStreamWaitEvent(comm_stream_, stream_events_[i], 0),
          "cudaStreamWaitEvent(collective)");
  }
  wait_exchange(start_exchange(group, -1), s);
}

void CudaBackend::all_gather(const void* src, void* dst, size_t bytes_per_rank, int s,
                             const char* label) {
  cudaStream_t st = stream(s, "all_gather");
  if (nccl_) {
    traced(
        "collective", [&] { return named(label, "all-gather") + " (NCCL)"; }, s, st,
        [&] { nccl_->all_gather(src, dst, bytes_per_rank, st); });
    return;
  }
  // Shared GPU: push this rank's block to slot `me` of every peer's staging copy.
  const int tp = comms_.tp(), me = comms_.tp_rank();
  char* out = static_cast<char*>(dst);
  if (tp > 1) {
    const SymmetricBuffer& buf = staging(bytes_per_rank * static_cast<size_t>(tp));
    ce_collective(
        buf, bytes_per_rank, [&](int) { return src; }, s,
        named(label, "all-gather") + " (copy engines)");
    // The peers' blocks only: this rank's slot of the staging buffer was never written, and
    // src may already be dst's own block (an in-place all-gather).
    for (int p = 0; p < tp; ++p) {
      if (p == me) continue;
      const size_t at = static_cast<size_t>(p) * bytes_per_rank;
      copy_on(out + at, static_cast<const char*>(buf.local) + at, bytes_per_rank, st,
              "all-gather staging");
    }
  }
  copy_on(out + static_cast<size_t>(me) * bytes_per_rank, src, bytes_per_rank, st,
          "all-gather own block");
}

void CudaBackend::reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank,
                                 int s, const char* label) {
  cudaStream_t st = stream(s, "reduce_scatter");
  if (nccl_) {
    traced(
        "collective", [&] { return named(label, "reduce-scatter") + " (NCCL)"; }, s, st,
        [&] { nccl_->reduce_scatter(src, dst, dtype, count_per_rank, st); });
    return;
  }
  // Shared GPU: block d of every rank goes to slot `me` of rank d's staging copy, then each
  // rank sums its tp blocks in rank order in fp32 (the same bits every run).
  const int tp = comms_.tp(), me = comms_.tp_rank();
  const size_t block = static_cast<size_t>(count_per_rank) * dtype_size(dtype);
  const char* in = static_cast<const char*>(src);
  std::vector<const void*> parts(static_cast<size_t>(tp));
  parts[static_cast<size_t>(me)] = in + static_cast<size_t>(me) * block;
  if (tp > 1) {
    const SymmetricBuffer& buf = staging(block * static_cast<size_t>(tp));
    ce_collective(
        buf, block, [&](int to) { return in + static_cast<size_t>(to) * block; }, s,
        named(label, "reduce-scatter") + " (copy engines)");
    for (int p = 0; p < tp; ++p) {
      if (p != me) parts[static_cast<size_t>(p)] = static_cast<char*>(buf.local) + p * block;
    }
  }
  sum_partials(parts, dtype, count_per_rank, nullptr, 0, dst, dtype, s);
}

void CudaBackend::all_reduce(void* buf, DType dtype, int64_t count, int s, const char* label) {
  cudaStream_t st = stream(s, "all_reduce");
  if (nccl_) {
    traced(
        "collective", [&] { return named(label, "all-reduce") + " (NCCL)"; }, s, st,
        [&] { nccl_->all_reduce(buf, dtype, count, st); });
    return;
  }
  // Shared GPU: every rank's whole buffer to slot `me` of every peer, then the same fp32 sum
  // in rank order on every rank, so all ranks hold identical bits.
  const int tp = comms_.tp(), me = comms_.tp_rank();
  if (tp == 1) return;
  const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  const SymmetricBuffer& stage = staging(bytes * static_cast<size_t>(tp));
  ce_collective(
      stage, bytes, [&](int) { return static_cast<const void*>(buf); }, s,
      named(label, "all-reduce") + " (copy engines)");
  std::vector<const void*> parts(static_cast<size_t>(tp));
  for (int p = 0; p < tp; ++p) {
    parts[static_cast<size_t>(p)] =
        p == me ? buf : static_cast<const char*>(stage.local) + static_cast<size_t>(p) * bytes;
  }
  sum_partials(parts, dtype, count, nullptr, 0, buf, dtype, s);
}

// --- ordering and timing ---

void CudaBackend::join_streams(int s) {
  cudaStream_t target = stream(s, "join_streams");
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (static_cast<int>(i) == s) continue;
    check(cudaEventRecord(stream_events_[i], streams_[i]), "cudaEventRecord(join)");
    check(cudaStreamWaitEvent(target, stream_events_[i], 0), "cudaStreamWaitEvent(join)");
  }
}

void CudaBackend::synchronize() {
  {
    const auto wait = gpu_wait("synchronize");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }
  check_nccl_async();
  recycle_completed_exchanges(true);
}

double CudaBackend::time_ms(const std::function<void()>& body) {
  // A 1 ms spin ahead of the start event (as PyTorch's and Triton's benchmarks lead with a
  // sleep): the body is enqueued while it runs, so the timing starts on a busy GPU.
  check(cuda::launch_spin(1000000, streams_[0]), "launch_spin(timing lead)");
  check(cudaEventRecord(timing_start_, streams_[0]), "cudaEventRecord(timing start)");
  // Work the body issues on other streams must not start before the start event.
  fork_from_main();
  body();
  gather_into_main();
  check(cudaEventRecord(timing_stop_, streams_[0]), "cudaEventRecord(timing stop)");
  {
    const auto wait = gpu_wait("a timed run");
    check(cudaEventSynchronize(timing_stop_), "cudaEventSynchronize(timing stop)");
  }
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, timing_start_, timing_stop_), "cudaEventElapsedTime");
  check_nccl_async();
  recycle_completed_exchanges(true);  // everything issued so far is behind the stop event
  return static_cast<double>(ms);
}

// --- tracing ---

template <class Name, class Work>
void CudaBackend::traced(const char* category, Name&& name, int lane, cudaStream_t st,
                         Work&& work) {
  if (!tracing_) {
    work();
    return;
  }
  PendingSpan p{name(), category, lane, nullptr, nullptr};
  check(cudaEventCreate(&p.begin), "cudaEventCreate(trace)");
  check(cudaEventCreate(&p.end), "cudaEventCreate(trace)");
  check(cudaEventRecord(p.begin, st), "cudaEventRecord(trace)");
  work();
  check(cudaEventRecord(p.end, st), "cudaEventRecord(trace)");
  trace_.push_back(std::move(p));
}

void CudaBackend::set_tracing(bool on) {
  if (on) {
    synchronize();
    if (trace_origin_ == nullptr) check(cudaEventCreate(&trace_origin_), "cudaEventCreate(trace)");
    check(cudaEventRecord(trace_origin_, streams_[0]), "cudaEventRecord(trace origin)");
    check(cudaEventSynchronize(trace_origin_), "cudaEventSynchronize(trace origin)");
  }
  tracing_ = on;
}

std::vector<TraceSpan> CudaBackend::take_trace() {
  synchronize();
  std::vector<TraceSpan> out;
  for (PendingSpan& p : trace_) {
    float b = 0.0f, e = 0.0f;
    check(cudaEventElapsedTime(&b, trace_origin_, p.begin), "cudaEventElapsedTime(trace)");
    check(cudaEventElapsedTime(&e, trace_origin_, p.end), "cudaEventElapsedTime(trace)");
    out.push_back({std::move(p.name), p.category, p.lane, b, e});
    cudaEventDestroy(p.begin);
    cudaEventDestroy(p.end);
  }
  trace_.clear();
  return out;
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for later calls
    return 0;
  }
  return count;
}

bool cuda_backend_available() { return cuda_device_count() > 0; }

std::vector<std::string> cuda_device_uuids() {
  std::vector<std::string> out;
  const int count = cuda_device_count();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, d) != cudaSuccess) {
      cudaGetLastError();
      return {};  // a GPU this process cannot query is no GPU for the backend rule
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id;
    for (const char c : p.uuid.bytes) {
      const auto b = static_cast<unsigned char>(c);
      id += kHex[b >> 4];
      id += kHex[b & 15];
    }
    out.push_back(std::move(id));
  }
  return out;
}

std::unique_ptr<Backend> make_cuda_backend(const MeshComms& comms, const OverlapOptions& opts,
                                           const CudaPlacement& placement) {
  return std::make_unique<CudaBackend>(comms, opts, placement);
}

}  // namespace cgemm
