// The CUDA backend: one GPU per rank (Context's backend rule picks it; with gpu_sharing several
// ranks share one), cuBLASLt GEMMs on num_max_streams compute streams, and the ring's exchanges
// on one communication stream, moved by copy engines over CUDA IPC when the TP group shares a
// node (else by NCCL send/recv). The sequential path's collectives run on NCCL, or, when GPUs
// are shared (NCCL refuses two ranks of one communicator on one GPU), as copy-engine exchanges
// into a staging buffer followed by a local copy or an fp32 sum in rank order. Everything is
// asynchronous; ordering between streams is expressed with events only, never host waits,
// except where the interface asks for a synchronous call (copies to and from the host,
// synchronize, time_ms).
//
// This file composes the pieces in cuda/ and implements Backend by delegating to them:
//   devices          the GPUs this process sees, and opening the one this rank runs on
//   streams          compute and communication streams, and the events that order them
//   trace            span events around traced calls
//   event_timer      time_ms's events
//   compute          GEMMs, copies and the backend's kernels on the compute streams
//   grouped/         the grouped GEMM's runners (cuBLAS grouped, cuBLASLt tiles), their
//                    staging and bias kernel; its loop is the shared grouped_loop.hpp
//   elementwise      the training step's elementwise kernels (Compute's too)
//   world_max        the amaxes' max over the world (current scaling's one host round trip)
//   exchange_fifo    the exchanges in flight, their completion events in start order
//   device_memory    buffers, the symmetric-buffer registry, host copies
//   *_collectives    the sequential path's collectives, NCCL or copy engines
// The transports themselves are made in collective/ (cuda_transports.hpp).

#include <cuda_runtime_api.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cgemm/collective/cuda_transports.hpp"
#include "cgemm/core/cuda_check.hpp"
#include "cgemm/runtime/backends.hpp"
#include "cuda/compute.hpp"
#include "cuda/device_memory.hpp"
#include "cuda/devices.hpp"
#include "cuda/event_timer.hpp"
#include "cuda/exchange_fifo.hpp"
#include "cuda/grouped/runners.hpp"
#include "cuda/sequential_collectives.hpp"
#include "cuda/streams.hpp"
#include "cuda/trace.hpp"
#include "cuda/world_max.hpp"
#include "grouped_loop.hpp"

namespace cgemm {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(const MeshComms& comms, const OverlapOptions& opts, const CudaPlacement& placement,
              TransportKind transport);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  BackendKind kind() const override { return BackendKind::kCuda; }
  std::string name() const override { return "cuda"; }
  std::string transport() const override;
  std::string describe() const override;
  int tp_rank() const override { return comms_.tp_rank(); }
  int tp_size() const override { return comms_.tp(); }
  int num_streams() const override { return streams_->count(); }
  int compute_capability() const override { return props_.major * 10 + props_.minor; }
  std::string capture_refusal() const override;
  void* native_stream() const override { return streams_->main(); }

  void* allocate(size_t bytes) override { return memory_->allocate(bytes); }
  void release(void* p) noexcept override { memory_->release(p); }
  SymmetricBuffer allocate_symmetric(size_t bytes) override {
    transports_.drain();  // attaching is collective: no peer may wait on this host meanwhile
    return memory_->allocate_symmetric(bytes);
  }
  void release_symmetric(SymmetricBuffer& b) noexcept override { memory_->release_symmetric(b); }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override {
    memory_->copy_to_host(host_dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override {
    memory_->copy_from_host(dst, host_src, bytes);
  }
  void fill_normal(void* dst, DType dtype, const Shape& global, const Shape& local,
                   const Shape& offset, uint64_t seed, float std) override {
    compute_->fill_normal(dst, dtype, global, local, offset, seed, std);
  }
  void fill_nan(void* dst, DType dtype, int64_t count) override {
    compute_->fill_nan(dst, dtype, count);
  }

  void copy(void* dst, const void* src, size_t bytes, int s, const char* label) override {
    compute_->copy(dst, src, bytes, s, label);
  }
  void gemm(const GemmTask& task, int s) override { compute_->gemm(task, s); }
  void reorder(ReorderKind kind, const Shape& shape, int dp_size, const void* src, void* dst,
               DType dtype, int s) override {
    compute_->reorder(kind, shape, dp_size, src, dst, dtype, s);
  }
  void sum_partials(std::span<const void* const> parts, DType part_dtype, int64_t count,
                    const void* bias, int64_t bias_len, void* out, DType out_dtype,
                    int s) override {
    compute_->sum_partials(parts, part_dtype, count, bias, bias_len, out, out_dtype, s);
  }

  GroupedGemmHandle prepare_grouped_gemm(const GroupedGemmShape& shape,
                                         const std::string& name) override {
    return grouped_->prepare(shape, name);
  }
  void release_grouped_gemm(GroupedGemmHandle handle) noexcept override {
    grouped_->release(handle);
  }
  bool grouped_gemm(const GroupedGemmTask& t, int s) override {
    cudaStream_t st = streams_->at(s, "grouped_gemm");
    if (t.shape.path != GroupedPath::kLoop && grouped_->run(t, st)) return true;
    run_grouped_loop(*this, t, s);
    return t.shape.path == GroupedPath::kLoop;
  }

  void amax(const void* src, DType dtype, int64_t count, float* amax, int s) override {
    compute_->amax(src, dtype, count, amax, s);
  }
  void all_reduce_max(float* buf, int count, int s, const char* label) override;
  void update_scale(const ScaleUpdate& u, int s) override { compute_->update_scale(u, s); }
  void quantize(const QuantizeTask& t, int s) override { compute_->quantize(t, s); }
  void elementwise(const ElementwiseTask& t, int s) override { compute_->elementwise(t, s); }

  ExchangeToken start_exchange(std::span<const Exchange> group, int after_stream) override;
  void wait_exchange(ExchangeToken token, int s) override {
    // Traced between two events on the waiting stream: the second completes when both the
    // stream's earlier work and the exchange have, so the span is how long the stream stood still.
    cudaStream_t st = streams_->at(s, "wait_exchange");
    trace_->span(
        "wait", [&] { return "wait for " + exchanges_->name(token); }, s, st,
        [&] { exchanges_->wait(token, st); });
  }

  void all_gather(const void* src, void* dst, size_t bytes_per_rank, int s,
                  const char* label) override {
    collectives_->all_gather(src, dst, bytes_per_rank, s, label);
  }
  void reduce_scatter(const void* src, void* dst, DType dtype, int64_t count_per_rank, int s,
                      const char* label) override {
    collectives_->reduce_scatter(src, dst, dtype, count_per_rank, s, label);
  }
  void all_reduce(void* buf, DType dtype, int64_t count, int s, const char* label) override {
    collectives_->all_reduce(buf, dtype, count, s, label);
  }

  void fork_streams() override { streams_->fork_from_main(); }
  void join_streams(int s) override { streams_->join_into(s); }
  void after_external(void* external) override {
    streams_->main_after(static_cast<cudaStream_t>(external));
  }
  void external_after(void* external) override {
    streams_->external_after_all(static_cast<cudaStream_t>(external));
  }
  void synchronize() override;
  double time_ms(const std::function<void()>& body) override;
  void set_tracing(bool on) override;
  bool tracing() const override { return trace_->on(); }
  std::vector<TraceSpan> take_trace() override;

 private:
  [[noreturn]] void fail(const std::string& why) const { throw Error(where_ + ": " + why); }

  const MeshComms& comms_;
  OverlapOptions opts_;
  CudaPlacement placement_;
  std::string where_;
  cudaDeviceProp props_{};
  // Made in this order by the constructor and torn down explicitly by the destructor: a piece
  // is only handed pieces made before it.
  std::unique_ptr<cuda::Streams> streams_;
  std::unique_ptr<cuda::EventTimer> timer_;
  std::unique_ptr<cuda::Trace> trace_;
  std::unique_ptr<cuda::Compute> compute_;
  std::unique_ptr<cuda::GroupedRunners> grouped_;
  CudaTransports transports_;
  std::vector<Transport*> offered_;         // transports_.offered()
  std::vector<Transport*> peer_transport_;  // the one chosen for each TP rank
  std::unique_ptr<cuda::ExchangeFifo> exchanges_;
  std::unique_ptr<cuda::DeviceMemory> memory_;
  std::unique_ptr<cuda::SequentialCollectives> collectives_;
};

CudaBackend::CudaBackend(const MeshComms& comms, const OverlapOptions& opts,
                         const CudaPlacement& placement, TransportKind transport)
    : comms_(comms), opts_(opts), placement_(placement) {
  where_ = "cuda backend, rank " + std::to_string(comms.world_rank()) + " (tp rank " +
           std::to_string(comms.tp_rank()) + ", local rank " + std::to_string(comms.local_rank()) +
           " on " + comms.host_name() + ")";
  if (opts.num_max_streams < 1) {
    fail("num_max_streams must be at least 1, got " + std::to_string(opts.num_max_streams));
  }
  props_ = cuda::open_device(placement.device, where_);
  streams_ = std::make_unique<cuda::Streams>(opts.num_max_streams, opts.compute_stream_priority,
                                             opts.communication_stream_priority, where_);
  timer_ = std::make_unique<cuda::EventTimer>(where_);
  trace_ = std::make_unique<cuda::Trace>(where_);
  compute_ = std::make_unique<cuda::Compute>(*streams_, *trace_, comms.tp(), where_);
  grouped_ = std::make_unique<cuda::GroupedRunners>(where_);

  // Collective from here on: every rank of the TP group reaches these in the same order.
  transports_ = make_cuda_transports(comms, opts.use_ce, placement.gpu_sharing,
                                     static_cast<ncclComm_t>(placement.nccl_comm),
                                     transport == TransportKind::kUcx, where_);
  offered_ = transports_.offered();
  if (comms.tp() > 1) {
    peer_transport_ = choose_transports(offered_, comms.tp_rank(), comms.tp(), where_);
  }
  exchanges_ = std::make_unique<cuda::ExchangeFifo>(
      where_,
      [&comms](int tp_rank) { return comms.describe_rank(comms.world_rank_of_tp(tp_rank)); },
      [this] { transports_.drain(); });
  memory_ = std::make_unique<cuda::DeviceMemory>(offered_, *exchanges_, where_);
  // Chosen once: NCCL's collectives wherever there is a communicator (GPUs not shared).
  collectives_ =
      transports_.nccl != nullptr
          ? cuda::make_nccl_collectives(*transports_.nccl, *streams_, *trace_, comms.tp())
          : cuda::make_ce_collectives(*this, *streams_, where_);
}

CudaBackend::~CudaBackend() {
  // Let queued work finish before anything it uses goes away. Errors are ignored: a
  // destructor cannot report them, and the next CUDA call of the process would. A transport
  // that failed to drain has opened its stream waits (Transport::drain).
  try {
    transports_.drain();
  } catch (const std::exception&) {
  }
  cudaDeviceSynchronize();
  collectives_.reset();  // its staging buffer is freed with the other symmetric buffers
  // Every peer mapping is closed before the transport that opened it goes.
  memory_->release_all_symmetric();
  transports_.ce.reset();
  grouped_.reset();  // any runner a plan still holds: its calls are done (synchronized above)
  compute_.reset();
  transports_.nccl.reset();
  exchanges_.reset();
  trace_.reset();
  timer_.reset();
  streams_.reset();
  memory_.reset();  // the plain buffers
}

std::string CudaBackend::transport() const {
  // The transports the peers got (choose_transports); one name when they agree.
  std::string names;
  for (const Transport* t : peer_transport_) {
    if (t != nullptr && names.find(t->name()) == std::string::npos) {
      names += (names.empty() ? "" : " + ") + t->name();
    }
  }
  return names.empty() ? "none (tp = 1)" : names;
}

std::string CudaBackend::capture_refusal() const {
  // The ring's exchanges go to the peers' transports, and so do the copy-engine collectives of
  // shared GPUs; NCCL's collectives are capturable.
  for (const Transport* t : peer_transport_) {
    if (t != nullptr && !t->capture_refusal().empty()) return t->capture_refusal();
  }
  // Even over NCCL: the FIFO of exchanges in flight (cuda/exchange_fifo.hpp) records an event
  // per exchange and queries it from the host, which an event recorded in a capture refuses.
  if (comms_.tp() > 1) {
    return "the CUDA backend's exchange FIFO queries its exchanges' events from the host "
           "(cudaEventQuery), which an event recorded during a capture refuses";
  }
  return "";
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
    << "device: GPU " << placement_.device << " " << props_.name << ", compute capability "
    << props_.major << "." << props_.minor << ", " << props_.multiProcessorCount << " SMs, "
    << props_.totalGlobalMem / (size_t{1} << 20) << " MiB\n"
    << "libraries: CUDA runtime " << ver(runtime) << " (driver supports " << ver(driver) << "), "
    << CublasLtGemm::version() << ", " << NcclTransport::version() << "\n";
  s << transports_.describe();
  if (placement_.gpu_sharing) {
    s << "GPU shared by " << placement_.ranks_per_gpu
      << " ranks: no NCCL communicator; the sequential path's collectives run as copy-engine "
         "exchanges; times are not a speed measurement\n";
  }
  s << streams_->describe() << "num_sm_for_communication=" << opts_.num_sm_for_communication
    << ": copy engines take no SMs; NCCL is not capped by it ("
    << (transports_.nccl ? transports_.nccl->settings() : std::string("no NCCL communicator"))
    << ")\n"
    << compute_->describe() << "use_ce=" << (opts_.use_ce ? "true" : "false")
    << ", aggregate_all_gather=" << (opts_.aggregate_all_gather ? "true" : "false")
    << ", chunks_per_rank=" << opts_.chunks_per_rank;
  return s.str();
}

ExchangeToken CudaBackend::start_exchange(std::span<const Exchange> group, int after_stream) {
  validate_exchange_group(group, comms_.tp_rank(), comms_.tp(), where_);
  for (const Exchange& x : group) {
    if (!memory_->is_live(*x.dst)) {
      fail("start_exchange '" + std::string(x.label != nullptr ? x.label : "unnamed") +
           "': the destination is not a live symmetric buffer of this backend");
    }
  }
  if (after_stream >= 0) streams_->communication_after(after_stream);
  cudaStream_t comm = streams_->communication();
  trace_->span(
      "transfer", [&] { return cuda::group_name(group); }, streams_->count(), comm,
      [&] { start_group(peer_transport_, group, comm, where_); }, trace_exchange_bytes(group));
  return exchanges_->push(group, comm);
}

void CudaBackend::all_reduce_max(float* buf, int count, int s, const char* label) {
  cudaStream_t st = streams_->at(s, "all_reduce_max");
  const std::string what = std::string(label != nullptr ? label : "all_reduce_max") + " (" +
                           std::to_string(count) + " floats, max over " +
                           std::to_string(comms_.world_size()) + " ranks)";
  // As the collectives count an all-reduce: the buffer's bytes.
  transports_.drain();  // the host waits for `st` below
  trace_->span(
      "quantize", [&] { return what; }, s, st,
      [&] { cuda::all_reduce_max_world(comms_.world(), buf, count, st, what, where_); },
      int64_t{4} * count);
}

void CudaBackend::synchronize() {
  {
    const auto wait = exchanges_->host_wait("synchronize");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize", where_);
  }
  transports_.check_async_error();
  exchanges_->recycle(true);
}

double CudaBackend::time_ms(const std::function<void()>& body) {
  timer_->start(streams_->main());
  // Work the body issues on other streams must not start before the start event.
  streams_->fork_from_main();
  body();
  streams_->gather_into_main();
  timer_->stop(streams_->main());
  {
    const auto wait = exchanges_->host_wait("a timed run");
    timer_->wait();
  }
  const double ms = timer_->elapsed_ms();
  transports_.check_async_error();
  exchanges_->recycle(true);  // everything issued so far is behind the stop event
  return ms;
}

void CudaBackend::set_tracing(bool on) {
  if (on) synchronize();  // the origin is taken on an idle GPU
  trace_->set(on, streams_->main());
}

std::vector<TraceSpan> CudaBackend::take_trace() {
  synchronize();
  return trace_->take();
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const MeshComms& comms, const OverlapOptions& opts,
                                           const CudaPlacement& placement,
                                           TransportKind transport) {
  return std::make_unique<CudaBackend>(comms, opts, placement, transport);
}

}  // namespace cgemm
